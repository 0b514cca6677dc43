"""View models: what each screen shows, computed without Textual (screens only render them)."""
