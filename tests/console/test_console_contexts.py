"""The console's context history in headless Chromium: the recorded builds with their layer
bars, "why is this here" on a click, a replay to the same bytes, the diff of two builds."""

from typing import Any

import pytest

from tests.console.conftest import sign_in
from tests.console.sample import Tenant, audited_session

pytestmark = pytest.mark.slow
AGENT = "auditor"


@pytest.fixture(scope="module")
def audited(console_tenant: Tenant) -> tuple[str, list[str]]:
    with console_tenant.client(AGENT) as c:
        return audited_session(c)


def test_history_why_replay_and_diff(
    page: Any, server: str, console_tenant: Tenant, audited: tuple[str, list[str]]
):
    sid, built = audited
    sign_in(page, server, console_tenant.service_key, f"#/session/{sid}")
    page.click("#context-history")
    page.locator("#history-rows tr.build-row").first.wait_for()
    with console_tenant.client(AGENT) as c:
        listed = c.get(f"/v1/sessions/{sid}/contexts", params={"limit": 100}).json()["items"]
        newest = c.get(f"/v1/sessions/{sid}/contexts/{built[-1]}").json()
        d = c.get(f"/v1/sessions/{sid}/contexts/{built[0]}/diff/{built[-1]}").json()
    # the console's own builds (the session page) are not recorded
    assert [i["context_id"] for i in listed] == list(reversed(built))
    rows = page.locator("#history-rows tr.build-row")
    assert [r.get_attribute("data-id") for r in rows.all()] == list(reversed(built))
    # one layer bar per build, a segment per non-empty layer
    first = rows.first
    assert first.locator(".bar .seg").count() == sum(
        1 for v in listed[0]["tokens"].values() if v > 0
    )
    # the newest build is shown: its blocks in order, and why each is there on a click
    page.locator("#blocks-table tr.block-row").first.wait_for()
    keys = [r.get_attribute("data-key") for r in page.locator("#blocks-table tr.block-row").all()]
    assert keys == [b["key"] for b in newest["blocks"]]
    facts = next(b for b in newest["blocks"] if b["key"] == "block:facts")
    page.click(f"#block-{facts['position']}")
    assert page.text_content("#why-text") == facts["why"]
    assert "fact" in page.text_content("#why-sources")
    l2 = next(b for b in newest["blocks"] if b["layer"] == "l2")
    page.click(f"#block-{l2['position']}")
    assert page.text_content("#why-text") == l2["why"]
    # a replay renders the same bytes
    page.click("#replay-openai")
    page.locator("#replay-result .badge.ok").wait_for()
    # diff the oldest (A) against the newest (B)
    page.check(f"#pick-a-{built[0]}")
    page.check(f"#pick-b-{built[-1]}")
    page.click("#diff-button")
    page.locator("#diff-table").wait_for()
    assert page.text_content("#diff-summary").startswith(
        f"{len(d['added'])} added · {len(d['removed'])} removed · {len(d['changed'])} changed"
    )
    assert page.locator("#diff-table tr.diff-added").count() == len(d["added"])
    assert page.locator("#diff-table tr.diff-removed").count() == len(d["removed"])
