"""What a kernel is: names decoded, families, hardware peaks, FLOP counts. Imports only `read`."""
