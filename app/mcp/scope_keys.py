"""Where the request's caller waits for the MCP tools, in the ASGI scope (set by
`app.mcp.endpoint`, read by `app.mcp.calls`)."""

CALLER_SCOPE_KEY = "loom.caller"
