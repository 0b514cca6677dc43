"""NVIDIA's `nsys stats` reports, computed over the model to the nanosecond."""
