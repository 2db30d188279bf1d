"""The console's page and files over plain HTTP: served offline, with a strict CSP."""

import json
from pathlib import Path

import httpx

from app.console.router import CSP, STATIC_DIR


async def test_console_page_sends_a_strict_csp(admin_client: httpx.AsyncClient):
    resp = await admin_client.get("/console", headers={"Authorization": ""})
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/html")
    assert resp.headers["content-security-policy"] == CSP
    assert "script-src 'self';" in CSP and "unsafe-inline" not in CSP
    assert resp.headers["x-frame-options"] == "DENY"
    assert '<script type="module" src="/console/static/js/main.js">' in resp.text
    # no inline script or style: the CSP would block them anyway
    assert "<script>" not in resp.text and "style=" not in resp.text


async def test_console_static_files_are_served_with_the_csp(admin_client: httpx.AsyncClient):
    for path in sorted(p.relative_to(STATIC_DIR).as_posix() for p in STATIC_DIR.rglob("*.*")):
        resp = await admin_client.get(f"/console/static/{path}")
        assert resp.status_code == 200, path
        assert resp.headers["content-security-policy"] == CSP
        if path.endswith(".js"):
            assert "javascript" in resp.headers["content-type"]
            # data reaches the page as text nodes only
            assert "innerHTML" not in resp.text and "insertAdjacentHTML" not in resp.text
            assert "document.write" not in resp.text and "eval(" not in resp.text
            assert "localStorage" not in resp.text and "document.cookie" not in resp.text
    missing = await admin_client.get("/console/static/nope.js")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"]


async def test_console_is_not_in_the_api_document(admin_client: httpx.AsyncClient):
    doc = (await admin_client.get("/openapi.json")).json()
    assert not [p for p in doc["paths"] if p.startswith("/console")]
    committed = json.loads((Path(__file__).parents[2] / "openapi" / "openapi.json").read_text())
    assert committed == doc


def test_console_assets_need_no_network():
    """Every URL the page and its modules load is its own (no CDN, no other origin). The
    SVG namespace is a name that looks like an address, and nothing loads it."""
    for path in STATIC_DIR.rglob("*.*"):
        text = path.read_text(encoding="utf-8").replace('"http://www.w3.org/2000/svg"', "")
        assert "http://" not in text and "https://" not in text, path
        assert "//cdn" not in text, path
