"""The Model Context Protocol server (`nsight-tui mcp`): the model's answers for agents.

`served` (which paths may be read), `answers` (what each tool answers, through the render and
parsers code paths the command line uses) and `server` (the MCP SDK's MCPServer over them; the
only module importing the SDK). Imports render and parsers, never the TUI or Textual.
"""
