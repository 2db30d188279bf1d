"""Built-in agent tools: Anthropic tool definitions and their execution (`registry`).

GET /v1/sessions/{id}/tools serves the definitions; POST /v1/sessions/{id}/tool-calls
runs one `tool_use` block and answers its `tool_result` block. Decisions:
* A tool_result's `content` is JSON text: the tool's output, or
  `{"error": {"code", "message", "details"}}` with `is_error: true`. Tool failures are
  HTTP 200 (what an agent loop can feed back to the model); only a missing session
  (404), a body that is not a tool_use block (422) or auth failures are HTTP errors.
* `recall_conversation(offset, limit <= 50, promote=false)`: messages offset+1 ..
  offset+limit (seqs are gap-free from 1), each text cut at 4,000 characters
  (`truncated: true`); `promote` optionally keeps them in the context.
* `search_conversation(query, limit <= 20, promote=true, scope=session|agent|tenant)`:
  the swap search with rerank; "agent" means the session's agent; agent keys may not
  use "tenant" (FORBIDDEN).
* Handlers run inside a SAVEPOINT: a failing tool leaves no partial writes.
"""
