"""nsight-tui: a terminal explorer for NVIDIA Nsight Systems profiles.

One installed name over the repository's folders (see ARCHITECTURE.md):
``nsight_tui.parsers`` (the model: SQLite export -> ranges, kernels, reports; ``parsers/``),
``nsight_tui.render`` (numbers and tables as text), ``nsight_tui.tui`` (the Textual app;
``tui/``), ``nsight_tui.capture`` (the annotated workload under nsys; ``capture/``) and
``nsight_tui.cli`` (the command line, one module per subcommand).
"""
__version__ = "0.2.0"
