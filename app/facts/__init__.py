"""Durable facts: extraction from conversations, validity in time,
history, and the facts context block. `policy` holds the pure rules."""
