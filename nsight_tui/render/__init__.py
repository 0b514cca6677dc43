"""The render layer: numbers with units -> text (terminal, Markdown, CSV, JSON) and output files.

The core (``nsight_tui.parsers``) returns numbers; everything a person reads is formatted here.
"""
