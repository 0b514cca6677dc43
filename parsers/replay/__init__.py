"""The replay: the captured step re-timed from its dependencies, unchanged (identity) or edited
(what if). `graph` builds the dependencies from the Trace, `simulate` re-times them, `edits` says
what changes, `steps` measures the step on either timeline, `critical` finds what holds it, and
`predict` puts them together for callers (the CLI, findings)."""
