"""The API docs, Swagger UI at /docs and ReDoc at /redoc, served without a CDN.

FastAPI's own pages load their JavaScript and CSS from jsDelivr (and ReDoc its fonts from
Google), so on a machine without internet access they stay blank. The bundles here come
from the `fastapi-offline` package, which ships Swagger UI 5 and ReDoc 2 builds that track
the versions FastAPI loads; FastAPI's page builders make the HTML. The app is built with
`docs_url=None, redoc_url=None` and `install` adds the pages, and declares in the OpenAPI
document the headers that choose who a request acts as (app.auth.openapi), so that Swagger
UI's Authorize dialog takes them, and gives every success response an example
(app.openapi_examples), so both pages show real shapes instead of `"string"`.
"""

from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from app import api, openapi_examples
from app.auth import openapi as acting

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
ASSETS_URL = "/docs-assets"
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"


def install(app: FastAPI) -> None:
    """Serve /docs and /redoc (assets under /docs-assets) and complete the OpenAPI document."""
    if app.docs_url or app.redoc_url:
        raise RuntimeError(
            "build the app with docs_url=None, redoc_url=None: app.docs serves the docs pages"
        )
    openapi_url = app.openapi_url or "/openapi.json"

    routes = [
        (api.PREFIX + route.path_format, route)
        for router in api.ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute)
    ]

    def openapi() -> dict[str, Any]:
        doc = FastAPI.openapi(app)  # cached by FastAPI until the routes change
        if acting.AGENT not in doc.get("components", {}).get("securitySchemes", {}):
            acting.declare(doc, routes)
            openapi_examples.complete(doc)  # once per document, as the declaration
        return doc

    app.openapi = openapi  # type: ignore[method-assign]
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        # behind a proxy that strips a path prefix, every URL the page loads keeps it
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
