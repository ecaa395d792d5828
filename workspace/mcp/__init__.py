"""Belvedir for coding agents: an MCP server (streamable HTTP at /mcp) whose tools are the API's own endpoints.

Each tool is the twin of an API endpoint (tools.py): called with the caller's bearer token, in process, through the
same view, so it has the same permissions, scoping and errors as the API by construction (twin.py). Answers are
sized for a model (sizing.py). The SDK's server is built once from the table (server.py) and served per request
from a plain Django view (view.py). It lives in workspace/, the composition layer: its tools span every app.
"""
