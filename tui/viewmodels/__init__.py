"""View models: what each screen shows, as plain data and state, without Textual."""
