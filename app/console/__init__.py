"""The browser console at /console: static files only (app.console.router).

The page is a small single-page app in plain JavaScript modules (no build step): it signs
in with an API key kept in the tab's sessionStorage and reads and writes only through the
public /v1 API with that key, so it can never see more than the key can.
"""
