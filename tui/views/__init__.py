"""One Screen per view of the TUI."""
