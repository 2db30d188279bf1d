"""End users: the people an agent's sessions are with."""
