"""Adapters that put the memory of agent frameworks in Loom Memory.

Each module needs its framework, installed with the client's extra of the same name:

- `loom_client.adapters.langgraph`: `LoomStore`, a LangGraph `BaseStore` on shared memory
  (`pip install 'loom-memory-client[langgraph]'`);
- `loom_client.adapters.openai_agents`: `LoomSession`, an OpenAI Agents SDK `Session` on a
  Loom session (`[openai-agents]`);
- `loom_client.adapters.claude_memory`: `LoomMemoryTool` / `AsyncLoomMemoryTool`, a backend
  for Claude's `memory` tool on shared memory (`[claude]`).

Importing this package imports no framework; each module imports only its own.
"""
