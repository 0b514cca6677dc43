"""Analyses over the one model, each a module returning plain results; `findings` reads their
results, `questions` (the report page) and `sweep` sit on top."""
