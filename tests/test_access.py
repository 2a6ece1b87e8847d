"""Tokens, scopes, the .tb contract and refusal before dispatch (pure logic, no Redis)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from pathlib import Path

import jwt
import pytest

from blackboard_mcp.auth import (
    Authorizer,
    ContractError,
    GrantExceedsIssuer,
    Manifest,
    MissingCapability,
    MissingSecret,
    NoRevocations,
    NotAdmin,
    SecretResolver,
    TokenExpired,
    TokenInvalid,
    TokenIssuer,
    TokenNotYetValid,
    TokenVerifier,
    TopicNotReadable,
    TopicNotWritable,
    UnknownKey,
    WrongWorkspace,
    generate_ed25519_keypair,
    issue_for_admin,
    load_board_contract,
    load_signing_keys,
    parse_contract,
    topic_matches,
)
from blackboard_mcp.gateway._tools import TOOLS_BY_NAME, bound_manifest

SECRET = "unit-secret-" + "z" * 40


def hs_pair() -> tuple[TokenIssuer, TokenVerifier]:
    signing, keys = load_signing_keys(secret=SECRET)
    assert signing is not None
    issuer = TokenIssuer(signing_key=signing, issuer="blackboard-mcp", audience="blackboard-mcp")
    verifier = TokenVerifier(
        keys=keys,
        issuer="blackboard-mcp",
        audience="blackboard-mcp",
        leeway=5,
        revocations=NoRevocations(),
    )
    return issuer, verifier


def token(issuer: TokenIssuer, **overrides: object) -> str:
    args: dict[str, object] = {
        "subject": "a",
        "workspace": "w",
        "read": ["*"],
        "write": ["*"],
        "capabilities": ["board_read"],
        "ttl_seconds": 60,
    }
    args.update(overrides)
    return issuer.issue(**args)  # type: ignore[arg-type]


def forged(claims: dict[str, object], key: str | bytes = SECRET, alg: str = "HS256") -> str:
    base = {
        "iss": "blackboard-mcp",
        "aud": "blackboard-mcp",
        "sub": "a",
        "ws": "w",
        "read": ["*"],
        "write": [],
        "caps": [],
        "secrets": [],
        "jti": "j",
        "iat": int(time.time()),
        "exp": int(time.time()) + 60,
    }
    base.update(claims)
    return jwt.encode(base, key, algorithm=alg, headers={"kid": "hs"})


def test_a_valid_token_gives_its_grant() -> None:
    issuer, verifier = hs_pair()
    grant = verifier.decode(token(issuer, read=["research-*"], write=["notes"]))
    assert grant.workspace == "w" and grant.subject == "a"
    assert grant.can_read("research-x") and not grant.can_read("notes")
    assert grant.can_write("notes") and not grant.can_write("research-x")


# Times are taken when the test runs, not when it is collected: a long session would
# otherwise reach the "not yet valid" case after its nbf had passed.
@pytest.mark.parametrize(
    ("claims", "error"),
    [
        (lambda now: {"exp": now - 100}, TokenExpired),
        (lambda now: {"nbf": now + 100}, TokenNotYetValid),
        (lambda now: {"aud": "someone-else"}, TokenInvalid),
        (lambda now: {"iss": "evil"}, TokenInvalid),
        (lambda now: {"ws": ""}, TokenInvalid),
    ],
    ids=["expired", "not-yet-valid", "wrong-audience", "wrong-issuer", "no-workspace"],
)
def test_bad_claims_are_refused(
    claims: Callable[[int], dict[str, object]], error: type[Exception]
) -> None:
    _, verifier = hs_pair()
    with pytest.raises(error):
        verifier.decode(forged(claims(int(time.time()))))


def test_a_tampered_signature_is_refused() -> None:
    issuer, verifier = hs_pair()
    good = token(issuer)
    head, payload, sig = good.split(".")
    claims = base64.urlsafe_b64decode(payload + "==").replace(b'"w"', b'"x"')
    bad = ".".join([head, base64.urlsafe_b64encode(claims).decode().rstrip("="), sig])
    with pytest.raises(TokenInvalid):
        verifier.decode(bad)


def test_alg_none_is_refused() -> None:
    _, verifier = hs_pair()
    unsigned = jwt.encode({"sub": "a"}, None, algorithm="none", headers={"kid": "hs"})
    with pytest.raises(TokenInvalid):
        verifier.decode(unsigned)


def test_hs256_signed_with_the_public_key_is_refused(tmp_path: Path) -> None:
    private, public = generate_ed25519_keypair(tmp_path, "k1")
    _, keys = load_signing_keys(private_key_file=private, public_keys_dir=tmp_path)
    verifier = TokenVerifier(
        keys=keys,
        issuer="blackboard-mcp",
        audience="blackboard-mcp",
        leeway=0,
        revocations=NoRevocations(),
    )
    # The classic confusion attack: the public PEM used as an HMAC secret under HS256.
    header = jwt.utils.base64url_encode(b'{"alg":"HS256","kid":"k1","typ":"JWT"}')
    body = jwt.utils.base64url_encode(
        b'{"iss":"blackboard-mcp","aud":"blackboard-mcp","sub":"a","ws":"w","jti":"j",'
        b'"iat":1,"exp":99999999999}'
    )
    signature = hmac.new(public.read_bytes(), header + b"." + body, hashlib.sha256).digest()
    confused = b".".join([header, body, jwt.utils.base64url_encode(signature)]).decode()
    with pytest.raises(TokenInvalid):
        verifier.decode(confused)


def test_ed25519_keys_rotate_by_kid_and_unknown_kids_are_refused(tmp_path: Path) -> None:
    old_private, _ = generate_ed25519_keypair(tmp_path, "old")
    new_private, _ = generate_ed25519_keypair(tmp_path, "new")
    tokens = []
    for private in (old_private, new_private):
        signing, _ = load_signing_keys(private_key_file=private)
        assert signing is not None
        tokens.append(
            token(
                TokenIssuer(signing_key=signing, issuer="blackboard-mcp", audience="blackboard-mcp")
            )
        )
    _, keys = load_signing_keys(public_keys_dir=tmp_path)
    verifier = TokenVerifier(
        keys=keys,
        issuer="blackboard-mcp",
        audience="blackboard-mcp",
        leeway=0,
        revocations=NoRevocations(),
    )
    assert [verifier.decode(t).subject for t in tokens] == ["a", "a"]
    (tmp_path / "old.pem").unlink()
    _, keys = load_signing_keys(public_keys_dir=tmp_path)
    verifier = TokenVerifier(
        keys=keys,
        issuer="blackboard-mcp",
        audience="blackboard-mcp",
        leeway=0,
        revocations=NoRevocations(),
    )
    with pytest.raises(UnknownKey):
        verifier.decode(tokens[0])


@pytest.mark.parametrize(
    ("pattern", "topic", "matches"),
    [
        ("a*", "ab", True),
        ("a*", "a", True),
        ("a*", "ab/..", False),
        ("a*", "A", False),
        ("a*", "ba", False),
        ("*", "anything", True),
        ("research-*", "research-", True),
        ("a.b", "axb", False),
        ("a+", "aa", False),
        ("*-x", "y-x", True),
        ("a*c", "ab", False),
        ("notes", "notes", True),
        ("notes", "notes2", False),
        ("a*", "", False),
    ],
)
def test_globs_never_over_match(pattern: str, topic: str, matches: bool) -> None:
    assert topic_matches(pattern, topic) is matches


def test_an_admin_can_only_grant_what_it_holds() -> None:
    issuer, verifier = hs_pair()
    admin = verifier.decode(
        token(
            issuer,
            read=["*"],
            write=["*"],
            capabilities=["admin", "board_read"],
            ttl_seconds=3600,
        )
    )
    _, granted = issue_for_admin(
        issuer,
        admin,
        subject="w1",
        workspace="w",
        read=["research-x"],
        write=[],
        capabilities=["board_read"],
        secrets=[],
        ttl_seconds=60,
    )
    assert granted.read_topics == ("research-x",)
    for overreach in (
        {"capabilities": ["board_read", "board_write"]},
        {"workspace": "other"},
        {"ttl_seconds": 7200},
        {"secrets": ["KEY"]},
    ):
        args: dict[str, object] = {
            "subject": "w1",
            "workspace": "w",
            "read": ["t"],
            "write": [],
            "capabilities": ["board_read"],
            "secrets": [],
            "ttl_seconds": 60,
            **overreach,
        }
        with pytest.raises(GrantExceedsIssuer):
            issue_for_admin(issuer, admin, **args)  # type: ignore[arg-type]


def test_an_admin_with_fewer_than_every_topic_is_no_admin() -> None:
    issuer, verifier = hs_pair()
    partial = verifier.decode(
        token(
            issuer,
            read=["research-*"],
            write=["research-a"],
            capabilities=["admin", "board_read"],
            ttl_seconds=3600,
        )
    )
    with pytest.raises(NotAdmin):
        issue_for_admin(
            issuer,
            partial,
            subject="w1",
            workspace="w",
            read=["research-x"],
            write=[],
            capabilities=["board_read"],
            secrets=[],
            ttl_seconds=60,
        )


def test_the_packaged_contract_declares_the_five_tools() -> None:
    contract = load_board_contract()
    tools = {t.mcp_name: t for t in contract.tools.values()}
    assert set(tools) == {"update_state", "get_state", "list_keys", "search_keys", "link_state"}
    assert tools["update_state"].capabilities_for(set()) == {"board_write"}
    assert tools["update_state"].capabilities_for({"source_path"}) == {"board_write", "file_read"}
    assert tools["get_state"].memory_reads == {"Board"}
    assert tools["link_state"].memory_writes == {"Board"}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("tool T\n    takes x as Nope\n    gives Text\n", "undefined type Nope"),
        ("tool T\n    gives Text\n", "needs both takes and gives"),
        ("tool T\n    takes x as Text\n    gives Text\n    frobs y\n", ":4: unknown clause"),
        (
            "memory M\ntool T\n    takes x as Text\n    gives Text\n    uses memory N read\n",
            "undefined memory N",
        ),
        ("    stray clause\n", ":1:"),
        ("tool T\n    takes x as Text\n    gives Text\ntool T\n", ":4: tool T is declared"),
        # An endpoint states requirements only: what it takes and gives is its protocol's.
        ("endpoint a/b\n    takes x as Text\n", ":2: unknown clause 'takes' in endpoint a/b"),
        ("memory M\nendpoint a/b\n    uses memory N read\n", ":2: endpoint a/b uses undefined"),
        ("endpoint a/b\nendpoint a/b\n", ":2: endpoint a/b is declared twice"),
        ("endpoint Resources\n", ":1: expected module, memory, type, tool or endpoint"),
    ],
)
def test_malformed_contracts_name_the_line(text: str, where: str) -> None:
    with pytest.raises(ContractError, match=where):
        parse_contract(text, "x.tb")


SECRET_TB = """
memory Board
type In
    q is Text
tool Fetch
    takes input as In
    gives Text
    requires network
    secrets API_KEY
"""


def test_refusals_come_in_order_and_name_what_is_missing() -> None:
    issuer, verifier = hs_pair()
    tool = parse_contract(SECRET_TB).tools["Fetch"]
    authorizer = Authorizer()
    grant = verifier.decode(token(issuer, capabilities=["network"], read=["pub"], write=["pub"]))
    with pytest.raises(WrongWorkspace):
        authorizer.authorize(
            grant,
            tool,
            arguments_present=set(),
            workspace="x",
            read_topics=set(),
            write_topics=set(),
        )
    bare = verifier.decode(token(issuer, capabilities=[]))
    with pytest.raises(MissingCapability, match="network"):
        authorizer.authorize(
            bare,
            tool,
            arguments_present=set(),
            workspace="w",
            read_topics=set(),
            write_topics=set(),
        )
    with pytest.raises(TopicNotReadable, match="secret"):
        authorizer.authorize(
            grant,
            tool,
            arguments_present=set(),
            workspace="w",
            read_topics={"secret"},
            write_topics=set(),
        )
    with pytest.raises(TopicNotWritable, match="other"):
        authorizer.authorize(
            grant,
            tool,
            arguments_present=set(),
            workspace="w",
            read_topics={"pub"},
            write_topics={"other"},
        )
    with pytest.raises(MissingSecret, match="API_KEY"):
        authorizer.authorize(
            grant,
            tool,
            arguments_present=set(),
            workspace="w",
            read_topics={"pub"},
            write_topics={"pub"},
        )


def test_a_manifest_refuses_handlers_without_contract_and_contracts_without_handler() -> None:
    manifest: Manifest[object] = Manifest(load_board_contract())
    with pytest.raises(ContractError):
        manifest.bind("delete_everything", object())
    manifest.bind("get_state", object())
    with pytest.raises(ContractError, match="update_state"):
        manifest.require_complete()
    # An endpoint runs on what the contract states for it, or not at all.
    assert manifest.endpoint("resources/read").capabilities_for(set()) == {"board_read"}
    with pytest.raises(ContractError, match="resources/write has no contract"):
        manifest.endpoint("resources/write")


def test_each_tools_spec_is_bound_to_its_contract_and_its_request_class() -> None:
    contract = load_board_contract()
    manifest = bound_manifest()
    for tool in contract.tools.values():
        spec = manifest.handler(tool.mcp_name)
        assert spec.requirements == tool
    # Every tool is admitted in its first round trip to Redis.
    assert {name for name, spec in TOOLS_BY_NAME.items() if spec.gated} == set(TOOLS_BY_NAME)


def test_a_secret_value_never_shows_in_repr_errors_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    value = "s3cr3t-VALUE-do-not-print"
    (tmp_path / "API_KEY").write_text(value)
    issuer, verifier = hs_pair()
    tool = parse_contract(SECRET_TB).tools["Fetch"]
    holder = verifier.decode(token(issuer, secrets=["API_KEY"]))
    resolver = SecretResolver(environ={}, secrets_dir=tmp_path)
    with caplog.at_level(logging.DEBUG):
        secret = resolver.resolve(holder, tool, "API_KEY")
        logging.getLogger("test").info("resolved %s %r", secret, secret)
        with pytest.raises(MissingSecret) as refused:
            resolver.resolve(verifier.decode(token(issuer)), tool, "API_KEY")
    assert secret.reveal() == value
    assert value not in repr(secret) and value not in str(secret)
    assert value not in str(refused.value)
    assert all(value not in record.getMessage() for record in caplog.records)
    # Everything else that holds or names the secret prints without its value.
    assert value not in f"{secret} {secret!r} {resolver!r} {tool}"
    assert value not in str(refused.value.details)
