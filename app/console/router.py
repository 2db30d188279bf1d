"""Serve the console: the page shell at /console and its modules under /console/static.

Nothing here reads data: the page calls the public REST API with the key the user signs in
with. Every answer carries a strict Content-Security-Policy (no inline script or style, no
other origin), so stored content that slipped past the page's escaping still could not run.
"""

import html
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

CONSOLE_URL = "/console"
STATIC_URL = CONSOLE_URL + "/static"
STATIC_DIR = Path(__file__).parent / "static"

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


class _ConsoleFiles(StaticFiles):
    """Static files with the console's security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(HEADERS)
        # the modules change with the server, not per user: revalidate, never serve stale
        response.headers["Cache-Control"] = "no-cache"
        return response


def _shell(root: str) -> str:
    # the page's URLs are absolute (base-uri 'none' rules out <base>), so they carry the
    # root path a proxy may have stripped
    return (
        (STATIC_DIR / "index.html")
        .read_text(encoding="utf-8")
        .replace("{{root}}", html.escape(root, quote=True))
    )


def install(app: FastAPI) -> None:
    """Serve /console, and send `GET /` there (neither is in the OpenAPI document: they
    are pages, not API)."""
    app.mount(STATIC_URL, _ConsoleFiles(directory=STATIC_DIR), name="console-static")

    @app.get("/", include_in_schema=False)
    async def root(request: Request) -> RedirectResponse:
        # a person who opens the server's address lands on the console (307: the address
        # stays the server's, nothing is cached as permanent)
        return RedirectResponse(request.scope.get("root_path", "") + CONSOLE_URL, 307)

    @app.get(CONSOLE_URL, include_in_schema=False)
    @app.get(CONSOLE_URL + "/", include_in_schema=False)
    async def console(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return HTMLResponse(_shell(root), headers={**HEADERS, "Cache-Control": "no-store"})
