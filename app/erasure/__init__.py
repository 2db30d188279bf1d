"""Erasure: a user, a session or an agent's private memory, every derived byte,
with a receipt."""
