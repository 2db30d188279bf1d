"""Built-in agent tools: Anthropic tool definitions and their execution (`registry`)."""
