"""The session resource: `/v1/sessions`, what a client creates, reads, changes and ends.

It stands above memory, context, knowledge, facts and profiles because a session's config
composes their per-session settings, its responses show tokens per layer, and its creation
reads the agent's profile (the ROM, and the `facts` and `audit` defaults) and runs the
other domains' create hooks. The session's row, who may see it and its queries stay low,
in `app.sessions`, for the domains that store things in a session.
"""
