"""A token that may write a topic but not read it learns nothing of that topic's content.

It may learn that a note exists and its version (it needs the version to write with
``expect_version``), never a note's digest, body, size or kind, and its errors are the same
whether a note it may not read exists or not.
"""

from __future__ import annotations

from app_support import InProcessGateway
from support import agent_token, call

from blackboard_mcp.auth import TokenIssuer

SECRET_DIGEST = "the merger closes on friday at 9"
SECRET_BODY = "the price is 41 per share; " * 8


async def seed(app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str) -> None:
    owner = agent_token(issuer, workspace, sub="owner")
    async with app_gateway.mcp_client(owner) as client:
        for uri, kwargs in (
            (f"bb://{workspace}/beta/plan", {"body": SECRET_BODY}),
            (f"bb://{workspace}/beta/grid", {"columns": ["a", "b"], "rows": [["1", "2"]]}),
            (f"bb://{workspace}/gamma/x", {"body": SECRET_BODY}),
            (f"bb://{workspace}/alpha/mine", {"body": "readable"}),
        ):
            err, body = await call(client, "update_state", uri=uri, digest=SECRET_DIGEST, **kwargs)
            assert not err, body


def leaks(body: dict[str, object], workspace: str) -> list[str]:
    # The workspace's random name is no leak, and could hold the body's size by chance.
    text = str(body).replace(workspace, "<workspace>")
    return [s for s in (SECRET_DIGEST, "41 per share", str(len(SECRET_BODY))) if s in text]


async def test_a_write_only_conflict_carries_the_version_but_never_the_digest(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    await seed(app_gateway, issuer, workspace)
    writer = agent_token(issuer, workspace, sub="writer", read=["alpha"], write=["beta"])
    async with app_gateway.mcp_client(writer) as client:
        for expect_version in (0, 7):
            err, body = await call(
                client,
                "update_state",
                uri=f"bb://{workspace}/beta/plan",
                digest="mine",
                body="x",
                expect_version=expect_version,
            )
            assert err and body["error"]["code"] == "conflict"
            assert body["error"]["current_version"] == 1
            assert "current_digest" not in body["error"]
            assert leaks(body, workspace) == []
    # A caller that may read the topic still gets the digest it needs to merge.
    reader = agent_token(issuer, workspace, sub="reader", read=["beta"], write=["beta"])
    async with app_gateway.mcp_client(reader) as client:
        err, body = await call(
            client,
            "update_state",
            uri=f"bb://{workspace}/beta/plan",
            digest="mine",
            body="x",
            expect_version=0,
        )
        assert err and body["error"]["current_digest"] == SECRET_DIGEST


async def test_a_write_only_append_error_tells_nothing_of_the_note(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    await seed(app_gateway, issuer, workspace)
    writer = agent_token(issuer, workspace, sub="writer", read=[], write=["beta"])
    async with app_gateway.mcp_client(writer) as client:
        # Too long only with the stored text: the size of the stored text must not show.
        err, body = await call(
            client,
            "update_state",
            uri=f"bb://{workspace}/beta/plan",
            digest="d",
            append="y" * (1024 * 1024 - 10),
        )
        assert err and body["error"]["code"] == "too_large"
        assert leaks(body, workspace) == [], body
        assert str(1024 * 1024 - 10 + len(SECRET_BODY)) not in str(body)
        # Appending to a table is refused without saying that the note is a table.
        err, body = await call(
            client, "update_state", uri=f"bb://{workspace}/beta/grid", digest="d", append="z"
        )
        assert err and body["error"]["code"] == "invalid_argument"
        assert "table" not in body["error"]["message"]


async def test_a_link_to_an_unreadable_note_is_forbidden_whether_it_exists_or_not(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    await seed(app_gateway, issuer, workspace)
    writer = agent_token(issuer, workspace, sub="writer", read=["alpha"], write=["beta"])
    answers = []
    async with app_gateway.mcp_client(writer) as client:
        for target in ("gamma/x", "gamma/missing"):
            err, body = await call(
                client,
                "link_state",
                src=f"bb://{workspace}/beta/plan",
                rel="cites",
                dst=[f"bb://{workspace}/{target}"],
            )
            assert err
            answers.append((body["error"]["code"], body["error"]["message"]))
    assert answers[0][0] == "forbidden"
    assert answers[0] == answers[1]


async def test_a_write_only_link_does_not_tell_which_links_existed(
    app_gateway: InProcessGateway, issuer: TokenIssuer, workspace: str
) -> None:
    await seed(app_gateway, issuer, workspace)
    link = {
        "src": f"bb://{workspace}/beta/plan",
        "rel": "cites",
        "dst": [f"bb://{workspace}/alpha/mine"],
    }
    owner = agent_token(issuer, workspace, sub="owner")
    async with app_gateway.mcp_client(owner) as client:
        err, body = await call(client, "link_state", **link)
        assert not err and body["warnings"] == []
        err, body = await call(client, "link_state", **link)
        assert not err and body["warnings"] == ["1 of these links already existed"]
    writer = agent_token(issuer, workspace, sub="writer", read=["alpha"], write=["beta"])
    async with app_gateway.mcp_client(writer) as client:
        err, body = await call(client, "link_state", **link)
        assert not err and body["warnings"] == []
