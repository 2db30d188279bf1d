"""A session's row, who may see it (`access`, `deps`) and its queries (`repository`): low in
the order, for the domains that store things in a session. The HTTP resource `/v1/sessions`
(its schemas, lifecycle and hooks) is `app.session_resource`, above them all."""
