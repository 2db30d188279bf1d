"""/docs and /redoc load everything from the service itself: they work without internet."""

import re
from typing import Any

import httpx
import pytest

ASSET_TYPES = ("text/javascript", "application/javascript", "text/css", "image/png")


@pytest.fixture
async def anonymous(app: Any) -> Any:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        yield c


def _references(html: str) -> list[str]:
    return re.findall(r'(?:src|href|spec-url)="([^"]*)"', html) + re.findall(
        r"url: '([^']*)'", html
    )


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_page_references_only_local_urls(anonymous: httpx.AsyncClient, page: str) -> None:
    resp = await anonymous.get(page)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
    html = resp.text
    # no scheme anywhere: no CDN script or style, no web font, no remote favicon
    assert "://" not in html, html
    refs = _references(html)
    assert refs, html
    for ref in refs:
        assert ref.startswith("/") and not ref.startswith("//"), ref


@pytest.mark.parametrize(("page", "marker"), [("/docs", b"SwaggerUIBundle"), ("/redoc", b"Redoc")])
async def test_every_referenced_asset_is_served(
    anonymous: httpx.AsyncClient, page: str, marker: bytes
) -> None:
    html = (await anonymous.get(page)).text
    scripts = re.findall(r'<script src="([^"]+)"', html)
    styles = re.findall(r'<link[^>]*rel="stylesheet"[^>]*href="([^"]+)"', html)
    icons = re.findall(r'<link rel="shortcut icon" href="([^"]+)"', html)
    assert scripts and icons and (styles or page == "/redoc")
    for url in scripts + styles + icons:
        resp = await anonymous.get(url)
        assert resp.status_code == 200, url
        kind = resp.headers["content-type"].split(";")[0]
        assert kind in ASSET_TYPES, (url, kind)
        if url in scripts:
            assert kind.endswith("javascript") and len(resp.content) > 100_000, url
        if url in styles:
            assert kind == "text/css", url
    bundle = (await anonymous.get(scripts[0])).content
    assert marker in bundle


async def test_swagger_and_redoc_load_the_local_openapi(anonymous: httpx.AsyncClient) -> None:
    swagger = (await anonymous.get("/docs")).text
    assert re.findall(r"url: '([^']*)'", swagger) == ["/openapi.json"]
    redoc = (await anonymous.get("/redoc")).text
    assert 'spec-url="/openapi.json"' in redoc
    doc = await anonymous.get("/openapi.json")
    assert doc.status_code == 200 and doc.json()["info"]["title"] == "Loom Memory"
