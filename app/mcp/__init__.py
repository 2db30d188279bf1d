"""The MCP server at `/mcp`: Loom's memory as tools for any MCP client (Claude Code,
Claude Desktop, agent frameworks), built on the official `mcp` SDK (`MCPServer`).

Decisions:
* Transport: Streamable HTTP, stateless, JSON responses. Every POST is answered on its
  own (no `Mcp-Session-Id`, no sticky sessions), so any API process behind the proxy can
  take any request; GET (a server-to-client stream) is 405, which the spec allows.
* Auth: the REST keys and headers. `app.mcp.endpoint` resolves the caller with
  `app.auth.deps.get_caller` before the MCP layer sees the request: no key, a revoked key,
  a bad `X-Agent-Id` are the same envelope and status as on REST. The caller rides in the
  ASGI scope to the tools (`app.mcp.calls`).
* Tools are thin: each builds the REST request model and calls the service the REST route
  calls, with the same `Caller`, so visibility, limits and error codes are REST's. A
  failure is a tool result with `isError: true` whose text starts with the REST error code
  (`session_not_found: No such session.`); bad input is `validation_error`, never a
  JSON-RPC error.
* DNS-rebinding protection is off: it guards endpoints that trust ambient credentials
  (cookies, localhost); this one needs a bearer key a rebinding page cannot know.
"""
