"""Browser fixtures: one live API server and one headless Chromium per module.

Chromium is Debian's (`apt-get install chromium`, done by scripts/test when missing;
LOOM_SKIP_BROWSER=1 skips the tests that need it, saying so),
driven by Playwright's Python API pointed at it with `executable_path`; Playwright's own
browser downloads are never used. Each test gets a fresh browser context, so the
sessionStorage holding the key starts empty.
"""

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.sample import Tenant, new_tenant
from tests.support.live import live_api


@pytest.fixture(scope="module")
def server(settings: Any) -> Iterator[str]:
    with live_api(settings) as base:
        yield base


@pytest.fixture(scope="module")
def console_tenant(server: str, settings: Any) -> Tenant:
    return new_tenant(server, settings.admin_key.get_secret_value())


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if os.environ.get("LOOM_SKIP_BROWSER") == "1":
        pytest.skip("LOOM_SKIP_BROWSER=1: the console's browser tests are skipped")
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail(
            "chromium is not installed: apt-get install chromium (scripts/install-chromium "
            "does it as root), or LOOM_SKIP_BROWSER=1 to skip the browser tests"
        )
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page; fails the test on any JavaScript error or CSP violation it reports."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    pg.on(
        "console",
        lambda m: (
            errors.append(f"console {m.type}: {m.text}")
            if m.type == "error" and "Content Security Policy" in m.text
            else None
        ),
    )
    pg.set_default_timeout(15_000)
    yield pg
    context.close()
    assert not errors, errors


def sign_in(pg: Any, base: str, key: str, hash_: str = "#/sessions") -> None:
    """Open the console at `hash_` and sign in with `key`."""
    pg.goto(f"{base}/console{hash_}")
    pg.fill("#key", key)
    pg.click("#signin-button")
    pg.wait_for_selector("#role")
