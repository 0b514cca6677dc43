"""The model over a loaded `Trace`: NVTX range trees with their GPU ops (attribution, main thread),
interval sets, iterations and phases. Imports only `read`."""
