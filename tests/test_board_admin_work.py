"""The admin's side of the board page, in a real browser against the real gateway: it counts
only refusals as calls not answered and never shows the operator's file paths; durations are
typed and shown as people write them (90s, 30m, 12h, 7d); every time is relative with the
exact UTC time on hover; the audit tail follows new records; and a retention setting that
would delete notes is shown and asked about before it is sent again, confirmed.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from lifecycle_support import on_redis, run_cli
from support import GatewayProcess, admin_token, agent_token, call, mcp_client
from test_board_page import CHROMIUM, addr, open_board

from blackboard_mcp.auth import TokenIssuer
from blackboard_mcp.gateway.page._routes import outcome_for_the_page
from blackboard_mcp.store import EmbeddedRedis
from blackboard_mcp.store.connection._field_names import FIELD

playwright_api = pytest.importorskip("playwright.async_api")

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not os.environ.get("CI"),
    reason="needs Debian's chromium (apt-get install chromium); CI installs it",
)

EXACT_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ( \(UTC\))?")
DURATION = re.compile(r"\d+[smhd]")


@pytest.fixture
async def browser() -> AsyncIterator[object]:
    async with playwright_api.async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        await chromium.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def admin_post(url: str, token: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        response = await http.post(url + path, json=body, headers=bearer(token))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def admin_get(url: str, token: str, path: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        response = await http.get(url + path, headers=bearer(token))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def write(url: str, token: str, uri: str) -> None:
    async with mcp_client(url, token) as client:
        err, body = await call(client, "update_state", uri=uri, digest="D.", body="b")
    assert not err, body


async def test_only_refusals_count_as_not_answered_and_no_operators_path_reaches_the_page(
    gateway: GatewayProcess,
    redis_server: EmbeddedRedis,
    issuer: TokenIssuer,
    workspace: str,
    browser: object,
    tmp_path: Path,
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    for key in ("a", "b"):
        await write(gateway.mcp_url, admin, addr(workspace, f"facts/{key}"))
    # One refusal: a reader's write.
    reader = agent_token(issuer, workspace, sub="reader", read=["facts"], write=[])
    async with mcp_client(gateway.mcp_url, reader) as client:
        err, body = await call(
            client, "update_state", uri=addr(workspace, "facts/x"), digest="D.", body=""
        )
    assert err and body["error"]["code"] == "forbidden"
    # Successful admin work, each audited with an outcome of its own words.
    await admin_post(gateway.url, admin, "/admin/tokens", {"sub": "scout", "read": ["facts"],
                     "caps": ["board_read"], "ttl_seconds": 600})  # fmt: skip
    await admin_post(gateway.url, admin, "/admin/retention",
                     {"topic": "facts", "max_age_seconds": 30 * 86400})  # fmt: skip
    await admin_post(gateway.url, admin, "/admin/delete",
                     {"uri": addr(workspace, "facts/b"), "confirm": True})  # fmt: skip
    dump = tmp_path / "home" / "op" / "dump.jsonl"
    dump.parent.mkdir(parents=True)
    exported = run_cli(
        "export", "--workspace", workspace, "--out", str(dump),
        env=on_redis(tmp_path / "home", redis_server.url),
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    tail = await admin_get(gateway.url, admin, "/board/api/audit")
    assert [r["tool"] for r in tail["records"][:4]] == [
        "cli.export", "admin.delete", "admin.retention", "admin.issue",
    ]  # fmt: skip

    context, page, _requested, errors = await open_board(browser, gateway.url, admin)
    try:
        await page.wait_for_selector("#activity-refusals:not([hidden])")
        refusals = await page.inner_text("#activity-refusals")
        assert refusals == "Calls not answered in the last hour: 1 forbidden.", refusals
        await page.click("#audit-details summary")
        await page.wait_for_selector("#audit tbody tr")
        rows = {}
        for row in await page.locator("#audit tbody tr").all():
            cells = await row.locator("td").all_inner_texts()
            rows.setdefault(cells[2], cells[3])
        assert rows["cli.export"] == "exported 1 to a file", rows
        assert rows["admin.retention"] == "max age 30d", rows
        assert rows["admin.delete"] == "deleted 1", rows
        # No path of the operator's anywhere: not shown, not in what the page was sent.
        assert str(tmp_path) not in await page.content()
        assert "dump.jsonl" not in await page.content()
        sent = await admin_get(gateway.url, admin, "/board/api/audit")
        assert str(tmp_path) not in str(sent)
        assert errors == []
    finally:
        await context.close()


@pytest.mark.parametrize(
    ("recorded", "shown"),
    [
        ("exported 213 to /home/op/dump.jsonl", "exported 213 to a file"),
        ("exported 2 to dump.jsonl", "exported 2 to a file"),  # a relative path, no slash
        ("exported 2 to stdout", "exported 2 to stdout"),
        ("read C:\\ops\\in.jsonl and ~/more", "read a file and a file"),
        ("imported 8, skipped 0", "imported 8, skipped 0"),
        ("restored as version 7", "restored as version 7"),
        ("forbidden", "forbidden"),
    ],
)
def test_an_audit_outcome_reaches_the_page_without_a_file_path(recorded: str, shown: str) -> None:
    assert outcome_for_the_page(recorded) == shown


async def test_durations_are_typed_and_shown_with_a_unit_and_a_bare_number_is_refused(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    # The longest token the board signs (90 days): its life is said in days, not minutes.
    admin = admin_token(issuer, workspace, ttl=90 * 86400)
    await write(gateway.mcp_url, admin, addr(workspace, "facts/a"))
    context, page, _requested, errors = await open_board(browser, gateway.url, admin)
    posted: list[str] = []
    page.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)
    try:
        await page.wait_for_selector("#admin-panel:not([hidden])")
        who = await page.inner_text("#who")
        assert "the token expires in 90 days." in who, who
        # The lifetime field: a duration with its unit, offered as one.
        assert DURATION.fullmatch(await page.input_value("#issue-ttl"))
        label = await page.inner_text("label[for=issue-ttl]")
        assert "7d" in label and "minutes" not in label, label
        await page.fill("#issue-sub", "helper")
        await page.fill("#issue-read", "facts")
        await page.fill("#issue-ttl", "90")
        await page.click("#issue-form button[type=submit]")
        await page.wait_for_selector("#issue-status:has-text('Not issued')")
        said = await page.inner_text("#issue-status")
        assert "add a unit" in said and "90s, 30m, 12h, 7d" in said, said
        assert posted == []  # refused on the page: nothing was sent
        # Past the board's maximum: the API's refusal, its seconds said as a duration.
        await page.fill("#issue-ttl", "100d")
        await page.click("#issue-form button[type=submit]")
        await page.wait_for_selector("#issue-status:has-text('between')")
        said = await page.inner_text("#issue-status")
        assert "between 1s and 90d" in said and "7776000" not in said, said
        assert "seconds" not in said, said
        await page.fill("#issue-ttl", "2h")
        await page.click("#issue-form button[type=submit]")
        await page.wait_for_selector("#issued:not([hidden])")
        listed = await admin_get(gateway.url, admin, "/admin/tokens")
        (helper,) = [t for t in listed["tokens"] if t["sub"] == "helper"]
        assert 7100 < helper["expires"] - time.time() <= 7200, helper
        row = page.locator(f"#tokens tr[data-id='{helper['id']}'] td[data-label=Expires]")
        await page.wait_for_selector(f"#tokens tr[data-id='{helper['id']}']")
        assert await row.inner_text() == "in 2 hours"

        # Retention: a duration with its unit; what an empty field does is said, truly.
        label = await page.inner_text("label[for=retention-age]")
        assert "empty" in label and "forever" not in label.split("empty")[1], label
        assert "clear" in label.split("empty")[1], label
        retention = "/admin/retention"

        async def set_age(topic: str, age: str) -> None:
            await page.fill("#retention-topic", topic)
            await page.fill("#retention-age", age)
            await page.click("#retention-form button[type=submit]")

        await set_age("facts", "7")
        await page.wait_for_selector("#retention-status:has-text('add a unit')")
        assert (await admin_get(gateway.url, admin, retention))["topics"] == {}
        await set_age("facts", "7d")
        await page.wait_for_selector("#retention-now:has-text('facts: 7d')")
        assert (await admin_get(gateway.url, admin, retention))["topics"] == {"facts": 7 * 86400}
        await set_age("facts", "forever")
        await page.wait_for_selector("#retention-now:has-text('facts: forever')")
        assert (await admin_get(gateway.url, admin, retention))["topics"] == {"facts": 0}
        await set_age("", "12h")
        await page.wait_for_selector("#retention-now:has-text('workspace: 12h')")
        assert (await admin_get(gateway.url, admin, retention))["max_age_seconds"] == 12 * 3600
        # Empty on a topic clears its own setting: the workspace's age applies to it again.
        await set_age("facts", "")
        await page.wait_for_selector("#retention-now:not(:has-text('facts'))")
        policy = await admin_get(gateway.url, admin, retention)
        assert policy["topics"] == {} and policy["max_age_seconds"] == 12 * 3600
        # "forever" on the workspace is no maximum age at all.
        await set_age("", "forever")
        await page.wait_for_selector("#retention-now:has-text('workspace: forever')")
        assert (await admin_get(gateway.url, admin, retention))["max_age_seconds"] is None
        # The refused issues above are the failed requests the browser logs.
        assert [e for e in errors if "status of 400" not in e] == []
    finally:
        await context.close()


async def test_every_time_the_page_shows_is_relative_with_the_exact_utc_time_on_hover(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    note = addr(workspace, "facts/a")
    for body in ("one", "two"):
        async with mcp_client(gateway.mcp_url, admin) as client:
            await call(client, "update_state", uri=note, digest="D.", body=body)
    await admin_post(gateway.url, admin, "/admin/tokens", {"sub": "scout", "read": ["facts"],
                     "caps": ["board_read"], "ttl_seconds": 600})  # fmt: skip
    context = await browser.new_context(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # The page's clock is the test's to move: minutes pass without waiting for them.
    await page.clock.install()
    await page.goto(gateway.url + "/board")
    await page.fill("#token", admin)
    await page.press("#token", "Enter")
    try:
        await page.wait_for_selector("#tokens tbody tr")
        await page.click("#audit-details summary")
        await page.click("text=facts (1)")
        await page.click(f"#notes button[title='{note}']")
        await page.wait_for_selector("#versions-status:text-is('2 versions')")
        await page.wait_for_selector("#feed-status[data-live=true]")
        await write(gateway.mcp_url, admin, addr(workspace, "facts/b"))
        await page.wait_for_selector("#feed li time")
        # The list is read again for the new note; then nothing more redraws it.
        await page.wait_for_selector(f"#notes tbody button[title='{addr(workspace, 'facts/b')}']")
        places = {
            "who": "#who",
            "notes list": "#notes tbody td[data-label=Updated]",
            "note meta": "#note-meta dd",
            "versions": "#versions tbody td",
            "audit tail": "#audit tbody td",
            "token list": "#tokens tbody td",
            "feed": "#feed li",
        }
        for place, cells in places.items():
            times = page.locator(f"{cells} time")
            assert await times.count() > 0, place
            for shown in await times.all():
                text = await shown.inner_text()
                exact = await shown.get_attribute("title") or ""
                assert EXACT_UTC.fullmatch(exact), (place, exact)
                assert (await shown.get_attribute("datetime") or "").endswith("Z"), place
                assert re.fullmatch(r"just now|(in )?\d+ (minute|hour|day)s?( ago)?", text), (
                    place,
                    text,
                )
        # No cell of those places shows a time in any other way (an epoch, an ISO string). An
        # epoch stands alone: ten digits inside a token id's hex are no time, and neither is
        # the workspace's name (random hex, which can be all digits).
        for place, cells in places.items():
            for shown in await page.locator(cells).all_inner_texts():
                text = shown.replace(workspace, "<workspace>")
                assert not re.search(r"\d{4}-\d\d-\d\d|\b\d{10,}\b", text), (place, shown)
        # Five minutes on, the words follow; the exact time stays.
        cell = f"#notes tbody tr:has(button[title='{note}']) td[data-label=Updated] time"
        updated = page.locator(cell)
        exact = await updated.get_attribute("title")
        assert await updated.inner_text() == "just now"
        await page.clock.fast_forward("05:00")
        await page.wait_for_function(
            "cell => document.querySelector(cell).textContent === '5 minutes ago'", arg=cell
        )
        assert await updated.get_attribute("title") == exact
        assert errors == []
    finally:
        await context.close()


async def test_the_audit_tail_follows_records_made_after_sign_in_without_a_reload(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    await write(gateway.mcp_url, admin, addr(workspace, "facts/a"))
    context, page, _requested, errors = await open_board(browser, gateway.url, admin)
    try:
        await page.wait_for_selector("#admin-panel:not([hidden])")
        await page.click("#audit-details summary")
        await page.wait_for_selector("#audit tbody tr")
        await page.wait_for_selector("#feed-status[data-live=true]")
        await page.evaluate("window.__same_page = true")
        # A write by another agent: the change feed hears it, and the tail follows.
        late = agent_token(issuer, workspace, sub="late-writer")
        await write(gateway.mcp_url, late, addr(workspace, "facts/late"))
        await page.wait_for_selector("#audit td:text-is('late-writer')", timeout=10_000)
        # A read changes nothing the feed hears: the refresh button brings it.
        quiet = agent_token(issuer, workspace, sub="quiet-reader")
        async with mcp_client(gateway.mcp_url, quiet) as client:
            await call(client, "list_keys", topic="facts")
        await page.click("#audit-refresh")
        await page.wait_for_selector("#audit td:text-is('quiet-reader')", timeout=10_000)
        # The admin's own work on the page is in the tail at once.
        await page.fill("#issue-sub", "helper")
        await page.fill("#issue-read", "facts")
        await page.click("#issue-form button[type=submit]")
        await page.wait_for_selector("#issued:not([hidden])")
        await page.wait_for_selector("#audit td:text-is('admin.issue')", timeout=10_000)
        assert await page.evaluate("window.__same_page") is True
        assert errors == []
    finally:
        await context.close()


async def age_notes(url: str, workspace: str, keys: list[str], days: int) -> None:
    """As if the notes had last been written ``days`` ago (the index follows the hash)."""
    from blackboard_mcp.store.connection import _key_names as keys_of

    client = aioredis.Redis.from_url(url)
    try:
        long_ago = int((time.time() - days * 86400) * 1000)
        for key in keys:
            await client.hset(keys_of.note(workspace, key), FIELD.updated, long_ago)
    finally:
        await client.aclose()


async def test_a_retention_that_would_delete_notes_is_shown_and_asked_before_it_is_set(
    gateway: GatewayProcess,
    redis_server: EmbeddedRedis,
    issuer: TokenIssuer,
    workspace: str,
    browser: object,
) -> None:
    admin = admin_token(issuer, workspace, ttl=3600)
    keys = ["old/n0", "old/n1"]
    for key in keys:
        await write(gateway.mcp_url, admin, addr(workspace, key))
    await age_notes(redis_server.url, workspace, keys, days=3)
    retention = "/admin/retention"
    context, page, _requested, errors = await open_board(browser, gateway.url, admin)
    sent: list[dict[str, Any]] = []
    page.on(
        "request",
        lambda r: (
            sent.append(r.post_data_json)
            if r.url.endswith("/admin/retention") and r.method == "POST"
            else None
        ),
    )
    try:
        await page.wait_for_selector("#admin-panel:not([hidden])")
        await page.fill("#retention-topic", "old")
        await page.fill("#retention-age", "1d")
        submit = page.locator("#retention-form button[type=submit]")
        await submit.click()
        await page.wait_for_selector("#retention-status:has-text('would delete')")
        said = await page.inner_text("#retention-status")
        assert "would delete 2 notes" in said, said
        for key in keys:
            assert addr(workspace, key) in said, said
        assert "Set." not in said
        assert (await admin_get(gateway.url, admin, retention))["topics"] == {}
        assert "2 notes" in await submit.inner_text()
        # Another value is a new question: the confirmation does not carry over.
        await page.fill("#retention-age", "2d")
        assert await submit.inner_text() == "Set"
        await page.fill("#retention-age", "1d")
        await submit.click()
        await page.wait_for_selector("#retention-status:has-text('would delete')")
        assert (await admin_get(gateway.url, admin, retention))["topics"] == {}
        # Confirmed: sent again with confirm, set, and said so.
        await submit.click()
        await page.wait_for_selector("#retention-now:has-text('old: 1d')")
        said = await page.inner_text("#retention-status")
        assert said.startswith("Set") and "2 notes" in said, said
        assert (await admin_get(gateway.url, admin, retention))["topics"] == {"old": 86400}
        assert await submit.inner_text() == "Set"
        asked = {"topic": "old", "max_age_seconds": 86400}
        assert sent == [asked, asked, {**asked, "confirm": True}], sent
        assert errors == []
    finally:
        await context.close()
