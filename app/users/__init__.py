"""End users (issue 28): the people an agent's sessions are with."""
