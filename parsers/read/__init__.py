"""Reading an export: the read-only source, columnar readers, validation and the loaded `Trace`.

The bottom layer: imports nothing else of parsers/."""
