"""The tests' own helpers: independent computations (SQL over the export, plain-Python references)
and the ways tests reach the committed samples. Imported as `helpers.NAME`; nothing here is a test."""
