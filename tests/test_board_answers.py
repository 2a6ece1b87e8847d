"""How the board page treats the answers it gets, in a real browser against the real gateway:
a refusal is said in the panel that asked, with the gateway's own message and hint, and an
answer overtaken by a newer request is dropped rather than shown over the newer one.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from support import GatewayProcess, admin_token, agent_token, call, mcp_client
from test_board_page import CHROMIUM, addr, bearer, issued_through_the_api, open_board

from blackboard_mcp.auth import TokenIssuer

playwright_api = pytest.importorskip("playwright.async_api")

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not os.environ.get("CI"),
    reason="needs Debian's chromium (apt-get install chromium); CI installs it",
)

# Longer than search_keys takes, which the search field's own limit keeps a person from typing.
OVERLONG_QUERY = "zebra " * 1700
# In the first note's answer alone (the topic's list carries digests, not bodies).
FIRST_BODY = "the body of the first note, answered late"


@pytest.fixture
async def browser() -> AsyncIterator[object]:
    async with playwright_api.async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        await chromium.close()


async def refusal_said(url: str, token: str, tool: str, arguments: dict[str, Any]) -> str:
    """The gateway's refusal of this call, as the page must say it: code, message, hint."""
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            url + "/board/api/call",
            json={"tool": tool, "arguments": arguments},
            headers=bearer(token),
        )
    assert answer.status_code >= 400, answer.text
    error = answer.json()["error"]
    assert error["message"] and error["hint"], error
    return f"{error['code']}: {error['message']} ({error['hint']})"


def refusals_logged(errors: list[str]) -> list[str]:
    """The page's console errors but the refused requests the browser logs itself."""
    return [e for e in errors if "the server responded with a status of 4" not in e]


async def test_a_refused_search_is_said_in_the_results_with_the_gateways_message_and_hint(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    token = agent_token(issuer, workspace)
    async with mcp_client(gateway.mcp_url, token) as client:
        await call(
            client, "update_state", uri=addr(workspace, "facts/a"), digest="Zebras.", body=""
        )
    expected = await refusal_said(gateway.url, token, "search_keys", {"q": OVERLONG_QUERY.strip()})
    context, page, _requested, errors = await open_board(browser, gateway.url, token)
    try:
        # The query as the page sends it, made longer than the gateway takes on its way.
        async def overlong(route: Any) -> None:
            body = json.loads(route.request.post_data)
            if body["tool"] == "search_keys":
                body["arguments"]["q"] = OVERLONG_QUERY.strip()
            await route.continue_(post_data=json.dumps(body))

        await page.route("**/board/api/call", overlong)
        await page.fill("#search", "zebra")
        await page.press("#search", "Enter")
        await page.wait_for_selector("#search-warnings li")
        warnings = await page.locator("#search-warnings li").all_inner_texts()
        assert warnings == ["The search was refused: " + expected]
        assert await page.inner_text("#search-title") == "No results for zebra"
        assert await page.locator("#search-hits li").count() == 0
        assert refusals_logged(errors) == []
    finally:
        await context.close()


async def test_a_refused_version_compare_is_said_with_the_gateways_message_and_hint(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    admin = admin_token(issuer, workspace)
    plan = addr(workspace, "plans/q3")
    async with mcp_client(gateway.mcp_url, admin) as client:
        for body in ("ship A", "ship B"):
            await call(client, "update_state", uri=plan, digest="The plan.", body=body)
    reader = await issued_through_the_api(
        gateway.url, admin, "reader", read=["plans"], write=[], caps=["board_read"], ttl_seconds=300
    )
    context, page, _requested, errors = await open_board(browser, gateway.url, reader["token"])
    try:
        await page.click("text=plans (1)")
        await page.click(f"#notes button[title='{plan}']")
        await page.wait_for_selector("#versions-status:text-is('2 versions')")
        # The reader's token is revoked while the page is open: the compare is refused.
        async with httpx.AsyncClient() as http:
            revoked = await http.post(
                gateway.url + "/admin/revoke", json={"id": reader["id"]}, headers=bearer(admin)
            )
        assert revoked.status_code == 200, revoked.text
        expected = await refusal_said(
            gateway.url, reader["token"], "get_state", {"uris": [plan + "@1", plan + "@2"]}
        )
        await page.click("#compare")
        await page.wait_for_selector("#versions-status:has-text('not compared')")
        said = await page.inner_text("#versions-status")
        assert said == "The versions were not compared: " + expected
        assert await page.locator("#diff li").count() == 0
        assert refusals_logged(errors) == []
    finally:
        await context.close()


async def test_an_earlier_notes_late_answer_does_not_replace_the_note_opened_after_it(
    gateway: GatewayProcess, issuer: TokenIssuer, workspace: str, browser: object
) -> None:
    token = agent_token(issuer, workspace)
    first, second = addr(workspace, "facts/first"), addr(workspace, "facts/second")
    async with mcp_client(gateway.mcp_url, token) as client:
        await call(client, "update_state", uri=first, digest="The first note.", body=FIRST_BODY)
        await call(client, "update_state", uri=second, digest="The second note.", body="two")
    context, page, _requested, errors = await open_board(browser, gateway.url, token)
    try:
        # Every answer body the page reads, kept a task after it was read: by then the page
        # has done all it does with it, up to its next request.
        await page.evaluate(
            """() => {
                const text = Response.prototype.text;
                window.__answers = [];
                Response.prototype.text = function () {
                  const read = text.call(this);
                  read.then(body => setTimeout(() => window.__answers.push(body), 0));
                  return read;
                };
            }"""
        )
        held, release = asyncio.Event(), asyncio.Event()

        async def hold_the_first_note(route: Any) -> None:
            arguments = json.loads(route.request.post_data)["arguments"]
            if arguments.get("uris") == [first] and not held.is_set():
                held.set()
                await release.wait()
            await route.continue_()

        await page.route("**/board/api/call", hold_the_first_note)
        await page.click("text=facts (2)")
        await page.click(f"#notes button[title='{first}']")
        await asyncio.wait_for(held.wait(), 10)
        await page.click(f"#notes button[title='{second}']")
        await page.wait_for_selector(f"#note-title:text-is('{second}')")
        await page.wait_for_selector("#versions-status:text-is('1 version')")
        release.set()
        await page.wait_for_function(
            "body => window.__answers.some(answer => answer.includes(body))", arg=FIRST_BODY
        )
        assert await page.inner_text("#note-title") == second
        assert await page.inner_text("#note-digest") == "The second note."
        assert await page.inner_text("#note-content") == "two"
        assert await page.inner_text("#versions-status") == "1 version"
        assert errors == []
    finally:
        await context.close()
