"""The console's user page (issue 28), in headless Chromium against a live server: the
users list links to a user; the page shows their sessions and facts; erasure needs the id
typed again and then shows the receipt; the user is gone afterwards."""

import uuid
from typing import Any

import pytest

from tests.console.conftest import sign_in
from tests.console.sample import Tenant

pytestmark = pytest.mark.slow


def test_user_page_shows_sessions_and_facts_and_erases_with_confirmation(
    page: Any, server: str, console_tenant: Tenant
) -> None:
    user = f"console-{uuid.uuid4().hex[:8]}"
    with console_tenant.client("support") as c:
        sids = []
        for _ in range(2):
            r = c.post("/v1/sessions", json={"user_id": user})
            sids.append(r.json()["id"])
            c.post(
                f"/v1/sessions/{sids[-1]}/messages",
                json={"messages": [{"role": "user", "content": "hello"}]},
            )
        c.post(
            "/v1/memory-items",
            json={"scope": f"user/{user}", "kind": "fact", "text": "Prefers the night shift."},
        )
    sign_in(page, server, console_tenant.service_key, "#/users")
    page.locator(f'#users-table tr[data-user="{user}"] a').click()
    page.locator("#user-title").wait_for()
    assert page.text_content("#user-title") == user
    for sid in sids:
        page.locator(f'#user-sessions tr[data-session="{sid}"]').wait_for()
    assert "Prefers the night shift." in page.text_content("#user-facts")
    assert page.is_disabled("#user-erase")
    page.fill("#erase-confirm", user[:-1])
    assert page.is_disabled("#user-erase")
    page.fill("#erase-confirm", user)
    page.click("#user-erase")
    page.locator("#erasure-receipt").wait_for()
    assert "completed" in page.text_content("#erasure-receipt")
    assert "messages" in page.text_content("#erasure-counts")
    with console_tenant.client() as c:
        assert c.get(f"/v1/users/{user}").status_code == 404
