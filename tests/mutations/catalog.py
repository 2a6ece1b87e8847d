"""The named ways of breaking the code that the tests must notice, each with the tests that should.

A mutation is one exact snippet of one file and what replaces it. Snippets are kept small so
that a change elsewhere in the file does not stale them; when one no longer matches, the runner
stops before running anything and names the mutation to update here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    name: str
    why: str  # what a surviving mutant would let through
    path: str  # relative to the repository root
    original: str  # must occur exactly once in the file
    replacement: str
    tests: tuple[str, ...]  # pytest arguments, fastest killers first


# Test sets, fastest first: the runner stops a run at the first failure.
_ACCESS = ("tests/test_access.py",)
_GATEWAY = ("tests/test_gateway_e2e.py", "tests/test_direct_calls.py", "tests/test_properties.py")
_CAS = ("tests/test_cas.py", "tests/test_concurrent_writers.py", "tests/test_multiprocess_cas.py")
_OAUTH = ("tests/test_oauth_scopes.py", "tests/test_oauth_resource_server.py")
_BUDGET = (
    "tests/test_budget_ceiling.py",
    "tests/test_token_accounting.py",
    "tests/test_get_state.py",
    "tests/test_list_keys.py",
    "tests/test_properties.py",
)

_WORKSPACE_GONE = "tests/test_delete.py::test_a_deleted_workspace_is_gone_but_its_audit_and_revocations_outlive_it"  # noqa: E501

_WRITE_REVOKED = "tests/test_revocation_and_limits.py::test_a_revoked_tokens_writes_are_refused_in_their_first_round_trip_writing_nothing"  # noqa: E501

_LOADING = "tests/test_redis_calls.py::test_a_redis_loading_its_data_is_unavailable_on_every_path_and_the_connections_recover"  # noqa: E501
_READ_REVOKED = "tests/test_revocation_and_limits.py::test_a_revoked_token_does_not_spend_its_subjects_rate_limit"  # noqa: E501

_LONG_NOTES = "tests/test_large_notes_keep_the_loop_free.py"
_SCRIPTS_BY_HASH = "tests/test_scripts_by_hash.py"
_READS_ADMITTED = "tests/test_reads_admitted_on_their_way.py"

_WIRES = "tests/test_transaction_connections.py"
_WIRE_CANCELLED = (
    f"{_WIRES}::test_a_transaction_cancelled_mid_round_trip_leaves_no_reply_for_the_next"
)
_WIRE_RESP3 = f"{_WIRES}::test_a_url_asking_for_resp3_still_writes_links_and_reads"
_WIRE_BOUND = f"{_WIRES}::test_transaction_connections_count_against_the_pool_bound"

MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        name="read-scope-check-removed",
        why="a token reads topics outside its read scopes",
        path="blackboard_mcp/auth/_dispatch.py",
        original="if not grant.can_read(topic):",
        replacement="if False:",
        tests=(*_ACCESS, *_GATEWAY),
    ),
    Mutation(
        name="write-scope-check-removed",
        why="a token writes topics outside its write scopes",
        path="blackboard_mcp/auth/_dispatch.py",
        original="if not grant.can_write(topic):",
        replacement="if False:",
        tests=(*_ACCESS, *_GATEWAY),
    ),
    Mutation(
        name="workspace-check-removed",
        why="a token acts in another workspace",
        path="blackboard_mcp/auth/_dispatch.py",
        original="if workspace != grant.workspace:",
        replacement="if False:",
        tests=(*_ACCESS, *_GATEWAY),
    ),
    Mutation(
        name="capability-check-removed",
        why="a read-only token writes, or reads a file without file_read",
        path="blackboard_mcp/auth/_dispatch.py",
        original="if not grant.has_capability(capability):",
        replacement="if False:",
        tests=(*_ACCESS, *_GATEWAY),
    ),
    Mutation(
        name="secret-handle-check-removed",
        why="a tool that needs a secret handle runs for a token that does not hold it",
        path="blackboard_mcp/auth/_dispatch.py",
        original="if handle not in grant.secrets:",
        replacement="if False:",
        tests=_ACCESS,
    ),
    Mutation(
        name="secret-resolver-holder-check-removed",
        why="a secret's value is resolved for a token that does not hold its handle",
        path="blackboard_mcp/auth/_secrets.py",
        original="if handle not in grant.secrets:",
        replacement="if False:",
        tests=_ACCESS,
    ),
    Mutation(
        name="get-state-addresses-not-read-checked",
        why="get_state reads notes in topics the token may not read",
        path="blackboard_mcp/store/requests/_reads.py",
        original="""    def reads(self) -> tuple[Address, ...]:
        return self.uris""",
        replacement="""    def reads(self) -> tuple[Address, ...]:
        return ()""",
        tests=_GATEWAY,
    ),
    Mutation(
        name="link-targets-not-read-checked",
        why="link_state links to (and names) notes the token may not read",
        path="blackboard_mcp/store/requests/_link.py",
        original="return self.dst",
        replacement="return ()",
        tests=_GATEWAY,
    ),
    Mutation(
        name="update-sources-not-read-checked",
        why="update_state cites as sources notes the token may not read",
        path="blackboard_mcp/store/requests/_update.py",
        original="return self.sources",
        replacement="return ()",
        tests=_GATEWAY,
    ),
    Mutation(
        name="listed-topic-not-read-checked",
        why="list_keys and search_keys answer for a topic the token may not read",
        path="blackboard_mcp/gateway/_tools.py",
        original="frozenset() if request.topic is None else frozenset([request.topic])",
        replacement="frozenset()",
        tests=_GATEWAY,
    ),
    Mutation(
        name="write-keeps-no-version",
        why="a whole write replaces a note and its old version is lost",
        path="blackboard_mcp/store/notes/_commit.py",
        original="\nkeep_version(KEYS[1], KEYS[2]",
        replacement="\nlocal _ = KEYS[1] or keep_version(KEYS[1], KEYS[2]",
        tests=("tests/test_history.py",),
    ),
    Mutation(
        name="past-version-shows-the-current-one",
        why="bb://ws/topic/key@N answers with the note as it is now",
        path="blackboard_mcp/store/reads/_reads.py",
        original='if kept is None or note["version"] == str(address.version):',
        replacement="if True:",
        tests=("tests/test_history.py",),
    ),
    Mutation(
        name="deleted-note-keeps-its-history",
        why="a deleted note's past versions (and their blobs) stay in Redis for ever",
        path="blackboard_mcp/store/lifecycle/_delete.py",
        original="""redis.call('DEL', note, p_out .. member, p_in .. member, p_at .. member)
    forget_versions(member)""",
        replacement="""redis.call('DEL', note, p_out .. member, p_in .. member, p_at .. member)""",
        tests=("tests/test_history.py", "tests/test_delete.py"),
    ),
    Mutation(
        name="watch-removed",
        why="a write based on a stale read commits over a concurrent one",
        path="blackboard_mcp/store/connection/_tx.py",
        original='[("WATCH", *watch), *reads]',
        # The first round trip without the WATCH: the reads still run, nothing guards them.
        replacement='[("PING",), *reads]',
        tests=_CAS,
    ),
    Mutation(
        name="watch-on-an-unrelated-key",
        why="update_state watches a key no writer touches, so races go unseen",
        path="blackboard_mcp/store/notes/_writes.py",
        original="        [note_key, *source_keys],\n        body,",
        replacement='        [note_key + ":unrelated", *source_keys],\n        body,',
        tests=_CAS,
    ),
    Mutation(
        name="cas-version-comparison-inverted",
        why="expect_version accepts exactly the stale versions",
        path="blackboard_mcp/store/notes/_writes.py",
        original="write.expect_version != old_version",
        replacement="write.expect_version == old_version",
        tests=_CAS,
    ),
    Mutation(
        name="budget-loosened-by-40-tokens",
        why="a read spends 40 tokens more than the caller's budget",
        path="blackboard_mcp/store/reads/_budget.py",
        original="    fitted: dict[str, Any] | None = None\n",
        replacement="    fitted: dict[str, Any] | None = None\n    budget += 40\n",
        tests=_BUDGET,
    ),
    Mutation(
        name="aof-never-fsynced",
        why="with appendfsync always configured, Redis leaves its AOF to the kernel's writeback",
        path="blackboard_mcp/store/embedded/_embedded.py",
        original='f"appendfsync {self.appendfsync}",',
        replacement='"appendfsync no",',
        tests=("tests/test_embedded_persistence.py",),
    ),
    Mutation(
        name="serve-ignores-workers",
        why="--workers N starts one worker and nobody notices",
        path="blackboard_mcp/serve/_run.py",
        original="self._workers = settings.workers",
        replacement="self._workers = 1",
        tests=(
            "tests/test_gateway_e2e.py::test_several_workers_serve_one_board_with_no_session_affinity",
        ),
    ),
    Mutation(
        name="list-keys-schema-without-cursor",
        why="clients are never told list_keys takes a cursor",
        path="blackboard_mcp/contracts/board.tb",
        original="    cursor is Optional Int\n",
        replacement="",
        tests=("tests/test_tool_surface.py",),
    ),
    Mutation(
        name="update-state-announced-idempotent",
        why="clients are told a repeated update_state changes nothing, and retry it blindly",
        path="blackboard_mcp/gateway/_tools.py",
        original="_WRITE = ToolAnnotations(open_world_hint=False)",
        replacement="_WRITE = ToolAnnotations(idempotent_hint=True, open_world_hint=False)",
        tests=("tests/test_tool_surface.py",),
    ),
    Mutation(
        name="endpoint-runs-without-its-requirements",
        why="a resource, a listen or the board page's endpoint runs for a token that lacks what "
        "contracts/board.tb states for it",
        path="blackboard_mcp/gateway/_calls.py",
        original="            await self._admitter.admit(grant, requirements, scope)\n",
        replacement="",
        tests=("tests/test_endpoint_requirements.py",),
    ),
    Mutation(
        name="endpoint-audited-under-a-tools-name",
        why="the audit says list_keys for a resource read, a listen or the page's feed",
        path="blackboard_mcp/gateway/_calls.py",
        original="return await self._attempt(endpoint, endpoint, grant, request_id, work)",
        replacement='return await self._attempt("list_keys", endpoint, grant, request_id, work)',
        tests=("tests/test_endpoint_requirements.py",),
    ),
    Mutation(
        name="revocation-ignored",
        why="a revoked token keeps working",
        path="blackboard_mcp/gateway/_calls.py",
        original="if admission.revoked:",
        replacement="if False:",
        tests=(
            "tests/test_gateway_e2e.py",
            "tests/test_direct_calls.py",
            _WRITE_REVOKED,
        ),
    ),
    Mutation(
        name="read-admission-not-judged",
        why="get_state's admission check runs in its first round trip and its verdict is ignored",
        path="blackboard_mcp/store/reads/_reads.py",
        original="gate.judge(replies.pop(0))",
        replacement="replies.pop(0)",
        tests=(_READ_REVOKED,),
    ),
    Mutation(
        name="write-admission-not-judged",
        why="a write's admission check runs in its first round trip and its verdict is ignored",
        path="blackboard_mcp/store/connection/_tx.py",
        original="gate.judge(_raise_error(replies[-1]))",
        replacement="_raise_error(replies[-1])",
        tests=(_WRITE_REVOKED,),
    ),
    Mutation(
        name="audit-record-skipped",
        why="tool calls leave no audit record",
        path="blackboard_mcp/gateway/_calls.py",
        original="await self._audit.record(record)",
        replacement="pass",
        tests=("tests/test_audit_and_leaks.py", "tests/test_audit_buffer.py"),
    ),
    Mutation(
        name="call-log-carries-arguments",
        why="a successful call's log line (DEBUG) echoes its arguments, secrets and all",
        path="blackboard_mcp/gateway/_calls.py",
        original='"tool call %s %s",',
        replacement='"tool call %s %s " + str(dict(arguments)).replace("%", "%%"),',
        tests=("tests/test_audit_and_leaks.py",),
    ),
    Mutation(
        name="offloaded-blob-not-freed",
        why="a replaced large body stays in Redis forever",
        path="blackboard_mcp/store/notes/_writes.py",
        original='commands.add("DEL", keys.blob(ws, old_blob))',
        replacement='commands.add("EXISTS", keys.blob(ws, old_blob))',
        tests=("tests/test_offload.py", "tests/test_append.py"),
    ),
    Mutation(
        name="append-log-not-extended",
        why="an append to a note in its log blob is acknowledged and its text lost",
        path="blackboard_mcp/store/notes/_appends.py",
        original="  redis.call('APPEND', KEYS[10], text)\n",
        replacement="",
        tests=("tests/test_append.py",),
    ),
    Mutation(
        name="metrics-per-worker",
        why="with several workers each scrape counts one worker's calls: counters seem to reset",
        path="blackboard_mcp/serve/_worker.py",
        original="os.environ[MULTIPROCESS_DIR_ENV] = str(metrics_dir)",
        replacement="pass",
        tests=(
            "tests/test_metrics.py::test_every_scrape_of_a_gateway_with_two_workers_counts_every_workers_calls",
        ),
    ),
    Mutation(
        name="batch-reads-refused-notes",
        why="get_state shows a note the token may not read when it shares a batch",
        path="blackboard_mcp/store/reads/_reads.py",
        original="allowed = [a for a in addresses if a.is_catch_up or readable(a.topic)]",
        replacement="allowed = list(addresses)",
        tests=("tests/test_gateway_e2e.py",),
    ),
    Mutation(
        name="search-without-topic-filter",
        why="search_keys finds notes in topics the token may not read",
        path="blackboard_mcp/store/search/_query.py",
        original='scope += f" @topic:',
        replacement='scope += "" and f" @topic:',
        tests=("tests/test_search.py", "tests/test_properties.py"),
    ),
    Mutation(
        name="external-audience-widened",
        why="a token the IdP issued for another API is accepted here",
        path="blackboard_mcp/auth/_external.py",
        original="audience=self._audiences,",
        replacement='audience=[*self._audiences, "https://other.test/mcp"],',
        tests=_OAUTH,
    ),
    Mutation(
        name="external-several-workspaces",
        why="an external token with several bb:ws: scopes picks one of them",
        path="blackboard_mcp/auth/_oauth_scopes.py",
        original="if len(scopes.workspaces) != 1:",
        replacement="if not scopes.workspaces:",
        tests=_OAUTH,
    ),
    Mutation(
        name="jwks-refetch-unbounded",
        why="tokens with made-up key ids make the gateway fetch the IdP's keys on every call",
        path="blackboard_mcp/auth/_jwks.py",
        original="if now - self._attempted_at < self._refetch_seconds:",
        replacement="if False:",
        tests=("tests/test_oauth_keys.py",),
    ),
    Mutation(
        name="jwks-body-uncapped",
        why="an IdP (or whoever answers for it) makes the gateway read a JWKS of any size",
        path="blackboard_mcp/auth/_jwks.py",
        original="if size > _MAX_DOCUMENT_BYTES:",
        replacement="if False:",
        tests=("tests/test_oauth_keys.py",),
    ),
    Mutation(
        name="jwks-fetch-without-deadline",
        why="a JWKS or metadata document whose headers or body trickle in holds the fetch",
        path="blackboard_mcp/auth/_jwks.py",
        original="async with asyncio.timeout(timeout), http.stream(",
        replacement="async with asyncio.timeout(3600), http.stream(",
        tests=("tests/test_oauth_keys.py",),
    ),
    Mutation(
        name="metadata-from-any-host",
        why="a forged Host header puts an attacker's URL into the metadata and the challenges",
        path="blackboard_mcp/gateway/_oauth_metadata.py",
        original="if host is None or not self._host_allowed(host):",
        replacement="if host is None:",
        tests=("tests/test_oauth_resource_server.py",),
    ),
    Mutation(
        name="change-feed-scope-check-removed",
        why="the board page's live feed names notes in topics the token may not read",
        path="blackboard_mcp/gateway/listening/_hub.py",
        original="readable = self.readable[topic] = self.reader.can_read(topic)",
        replacement="readable = self.readable[topic] = True",
        tests=("tests/test_board_page.py",),
    ),
    Mutation(
        name="listeners-of-other-scopes-share-an-interest",
        why="a listener whose token reads fewer topics hears the changes another's token may read",
        path="blackboard_mcp/gateway/listening/_hub.py",
        original="return self.reader.read_topics, self.notes, self.topics, self.lists",
        replacement="return (), self.notes, self.topics, self.lists",
        tests=("tests/test_subscriptions.py",),
    ),
    Mutation(
        name="sent-write-sent-again-on-a-cut-connection",
        why="a write whose reply was lost is sent again on a new connection: an append lands twice",
        path="blackboard_mcp/store/connection/_pool.py",
        original="if not repeatable:\n                raise",
        replacement="if False:\n                raise",
        tests=("tests/test_lost_replies.py",),
    ),
    Mutation(
        name="retried-write-not-told-yours",
        why="a retry whose first try landed is an ordinary conflict: the agent cannot tell",
        path="blackboard_mcp/store/notes/_writes.py",
        original="yours = old_version == write.expect_version + 1 and",
        replacement="yours = False and",
        tests=("tests/test_retrying_a_lost_answer.py",),
    ),
    Mutation(
        name="listener-pump-unpaced",
        why="under a burst every stream writes once per change, and the writes crowd out the "
        "board's own work (bench/notify_latency.py)",
        path="blackboard_mcp/gateway/listening/_hub.py",
        original="await self._sleep(self.write_interval())",
        replacement="await asyncio.sleep(0)",
        tests=("tests/test_subscriptions.py",),
    ),
    Mutation(
        name="listener-pump-paces-full-reads",
        why="a workspace written faster than one read an interval outruns the pump, whose "
        "listeners then fall further behind until the change log is trimmed past them",
        path="blackboard_mcp/gateway/listening/_hub.py",
        original="if changes and len(changes) < _READ_COUNT:",
        replacement="if changes:",
        tests=("tests/test_subscriptions.py",),
    ),
    Mutation(
        name="dropped-listener-resumes-from-its-start",
        why="a dropped listener's cursor does not move past what it was sent, so its catch-up "
        "lists again everything it already heard",
        path="blackboard_mcp/gateway/listening/_subscriptions.py",
        original="                    listener.handed(batch)\n",
        replacement="",
        tests=("tests/test_subscriptions.py",),
    ),
    Mutation(
        name="delete-leaves-the-other-ends-links",
        why="a note linked from a deleted one still lists (and warns about) the deleted note",
        path="blackboard_mcp/store/lifecycle/_delete.py",
        original="    unlink(p_out .. member, p_in, member, false)\n",
        replacement="",
        tests=("tests/test_delete.py",),
    ),
    Mutation(
        name="deleted-blob-never-freed",
        why="an offloaded body no note refers to any more stays in Redis forever",
        path="blackboard_mcp/store/lifecycle/_delete.py",
        original="redis.call('DEL', p_blob .. f[3])",
        replacement="redis.call('EXISTS', p_blob .. f[3])",
        tests=("tests/test_delete.py",),
    ),
    Mutation(
        name="cursor-readers-not-told-of-deletions",
        why="an agent following the change feed keeps acting on notes that were deleted",
        path="blackboard_mcp/store/reads/_reads.py",
        original='warnings = [*_deleted_notice(workspace, gone, out["cursor"]), *warnings]',
        replacement="warnings = list(warnings)",
        tests=("tests/test_delete.py",),
    ),
    Mutation(
        name="retention-ignores-topic-overrides",
        why="a topic set to keep its notes forever is swept with the workspace's age",
        path="blackboard_mcp/store/lifecycle/_retention.py",
        original="age = policy.max_age(topic)",
        replacement="age = policy.max_age_seconds",
        tests=("tests/test_retention.py",),
    ),
    Mutation(
        name="deleted-workspace-stays-registered",
        why="a workspace deleted whole is still reported by health and swept for retention",
        path="blackboard_mcp/store/lifecycle/_delete.py",
        original="await client.redis.srem(keys.workspaces(), ws)",
        replacement="pass",
        tests=(_WORKSPACE_GONE,),
    ),
    Mutation(
        name="deleted-workspace-keeps-retention",
        why="a workspace written again after its delete inherits the old retention settings",
        path="blackboard_mcp/store/lifecycle/_delete.py",
        original="await client.redis.delete(keys.retention(ws))",
        replacement="pass",
        tests=(_WORKSPACE_GONE,),
    ),
    Mutation(
        name="import-overwrites-existing-notes",
        why="an import without --replace overwrites notes written since the export",
        path="blackboard_mcp/store/lifecycle/_transfer.py",
        original="  return 0\nend\nlocal seq = redis.call('INCR', KEYS[2])",
        replacement="end\nlocal seq = redis.call('INCR', KEYS[2])",
        tests=("tests/test_export_import.py",),
    ),
    Mutation(
        name="import-line-unbounded",
        why="an import reads a line of any length, so one giant line can exhaust its memory",
        path="blackboard_mcp/store/lifecycle/_export_file.py",
        original="if len(line) > self._max:",
        replacement="if False:",
        tests=("tests/test_import_streaming.py",),
    ),
    Mutation(
        name="wire-kept-after-cancel",
        why="a transaction cancelled mid round trip leaves its late reply for the next caller",
        path="blackboard_mcp/store/connection/_wire.py",
        original="replies may still come.\n            self.close()",
        replacement="replies may still come.\n            pass",
        tests=(_WIRE_CANCELLED,),
    ),
    Mutation(
        name="wire-speaks-resp3",
        why="the store reads RESP3 replies in RESP2's shapes (links and deletions go wrong)",
        path="blackboard_mcp/store/connection/_wire.py",
        original='if username else ("AUTH", password))',
        replacement='if username else ("HELLO", 3, "AUTH", "default", password))',
        tests=(_WIRE_RESP3,),
    ),
    Mutation(
        name="wire-slot-never-freed",
        why="each transaction keeps a pool slot, so the gateway answers overloaded for good",
        path="blackboard_mcp/store/connection/_pool.py",
        original="if self._wires.give_back(wire):\n            self._free.release()",
        replacement="self._wires.give_back(wire)",
        tests=(_WIRE_BOUND,),
    ),
    Mutation(
        name="wire-ignores-tls",
        why="on a rediss:// URL the store's own connections speak plain text (or fail)",
        path="blackboard_mcp/store/connection/_wire.py",
        original="ssl_context = tls_context(probe)",
        replacement="ssl_context = None",
        tests=("tests/test_redis_tls.py",),
    ),
    Mutation(
        name="deadline-leaves-task-cancelled",
        why="a call whose Redis operation ran out of time leaves its task marked cancelled",
        path="blackboard_mcp/store/connection/_redis_errors.py",
        original="and self._task.uncancel() <= self._cancelling",
        replacement="and self._task.cancelling() <= self._cancelling + 1",
        tests=(
            "tests/test_redis_calls.py::test_a_task_whose_operation_ran_out_of_time_goes_on_uncancelled",
        ),
    ),
    Mutation(
        name="listing-admission-ignored",
        why="a revoked or over-limit token still lists and searches the board",
        path="blackboard_mcp/store/access/_admission.py",
        original="            judge=lambda reply: on_verdict(self._verdict(int(reply))),\n",
        replacement="            judge=lambda reply: on_verdict(self._verdict(0)),\n",
        tests=(
            "tests/test_revocation_and_limits.py::test_listing_and_search_are_refused_to_a_revoked_token_and_counted_against_the_limit",
        ),
    ),
    Mutation(
        name="endpoint-admission-ignored",
        why="a revoked token still reads what the admin API and the page's endpoints serve",
        path="blackboard_mcp/store/access/_admission.py",
        original="        return self._verdict(int(reply))\n",
        replacement="        return self._verdict(0)\n",
        tests=(
            "tests/test_endpoint_requirements.py::test_a_revoked_admin_token_cannot_read_the_audit_tail",
        ),
    ),
    Mutation(
        name="read-content-not-checked-against-its-version",
        why="get_state shows one version's digest with a newer version's body",
        path="blackboard_mcp/store/reads/_reads.py",
        original='if version is None or version.decode() != note["version"]:',
        replacement="if False:",
        tests=("tests/test_one_version_reads.py",),
    ),
    Mutation(
        name="part-starts-inside-a-character",
        why="a part whose offset falls inside a character drops that character",
        path="blackboard_mcp/store/reads/_reads.py",
        original="while 0 < at < len(data) and data[at] & 0xC0 == 0x80:",
        replacement="while False:",
        tests=("tests/test_exact_parts.py",),
    ),
    Mutation(
        name="table-part-rest-inside-a-row",
        why="the rest of a cut table names a byte inside the next row, so a row is lost",
        path="blackboard_mcp/store/reads/_table_rows.py",
        original="next_at.append(offset + after)",
        replacement="next_at.append(offset + after + 1)",
        tests=("tests/test_table_round_trip.py",),
    ),
    Mutation(
        name="delegation-beyond-the-parents-topics",
        why="a token exchange grants topics its subject token does not hold",
        path="blackboard_mcp/auth/_delegation.py",
        original="            if not any(pattern_covers(h, pattern) for h in held):",
        replacement="            if False:",
        tests=("tests/test_fleet_tokens.py",),
    ),
    Mutation(
        name="revoked-parent-leaves-its-delegates",
        why="revoking a token leaves the tokens delegated from it working",
        path="blackboard_mcp/store/access/_admission.py",
        original="for i = 4, #chain do",
        replacement="for i = 4, 3 do",
        tests=("tests/test_fleet_tokens.py",),
    ),
    Mutation(
        name="listeners-keep-a-revoked-token",
        why="an open listen of a revoked token goes on hearing of changes",
        path="blackboard_mcp/gateway/listening/_hub.py",
        original="                    listener.revoke()",
        replacement="                    pass",
        tests=(
            "tests/test_subscriptions.py::test_a_process_asks_once_for_all_its_listeners_tokens_and_ends_only_the_revoked_streams",
        ),
    ),
    Mutation(
        name="listeners-keep-a-revoked-parents-delegate",
        why="an open listen of a token delegated from a revoked one goes on hearing of changes",
        path="blackboard_mcp/store/access/_revocations.py",
        original="  for i = k + 2, k + 1 + chain do",
        replacement="  for i = k + 2, k + 1 do",
        tests=(
            "tests/test_revocation_and_limits.py::test_the_listeners_batch_check_and_the_per_call_check_agree_on_every_kind_of_revocation",
        ),
    ),
    Mutation(
        name="loading-reply-read-as-data",
        why="a Redis loading its data after a restart answers reads with an internal error",
        path="blackboard_mcp/store/connection/_wire.py",
        original="        if isinstance(reply, RedisError):",
        replacement=(
            "        if isinstance(reply, RedisError)"
            " and not isinstance(reply, RedisConnectionError):"
        ),
        tests=(_LOADING,),
    ),
    Mutation(
        name="loading-reply-read-as-verdict",
        why="a Redis loading its data after a restart answers writes with an internal error",
        path="blackboard_mcp/store/connection/_tx.py",
        original="    if isinstance(reply, RedisError):",
        replacement='    if isinstance(reply, RedisError) and "LOADING" not in str(reply).upper():',
        tests=(_LOADING,),
    ),
    Mutation(
        name="first-version-leaves-its-workspace-unregistered",
        why="a workspace created on a single Redis is never registered (nor swept by retention)",
        path="blackboard_mcp/store/notes/_writes.py",
        original='            commands.add("SADD", registry, ws)',
        replacement="            pass",
        tests=(
            "tests/test_transaction_connections.py::test_a_notes_first_version_joins_its_workspace_to_the_registry_in_its_own_transaction",
        ),
    ),
    Mutation(
        name="import-takes-any-time",
        why="an imported note dated past year 9999 makes every later read of it fail",
        path="blackboard_mcp/store/lifecycle/_transfer.py",
        original="highest = MAX_TIME_MS if name in _TIME_FIELDS else MAX_SAFE_INTEGER",
        replacement="highest = MAX_SAFE_INTEGER",
        tests=("tests/test_import_cannot_poison.py",),
    ),
    Mutation(
        name="import-takes-any-table",
        why="an imported table whose content is not its columns' TSV breaks reads of it",
        path="blackboard_mcp/store/lifecycle/_transfer.py",
        original="        columns = _check_table(columns, content)",
        replacement="        columns = columns",
        tests=("tests/test_import_cannot_poison.py",),
    ),
    Mutation(
        name="staleness-never-seen",
        why="a note derived from one written since reads as if nothing had moved on",
        path="blackboard_mcp/store/notes/_provenance.py",
        original=(
            "        if current != at:\n            said.add(member)\n"
            "            moved.setdefault(phrase"
        ),
        replacement=(
            "        if False:\n            said.add(member)\n            moved.setdefault(phrase"
        ),
        tests=("tests/test_provenance.py",),
    ),
    Mutation(
        name="link-removal-skips-the-target-scope",
        why="a token that may not read a link's target removes the link all the same",
        path="blackboard_mcp/store/requests/_link.py",
        original="        return self.dst\n",
        replacement="        return () if self.remove else self.dst\n",
        tests=(
            "tests/test_provenance.py::test_a_link_is_withdrawn_by_a_token_that_could_make_it_and_its_warning_stops",
        ),
    ),
    Mutation(
        name="catch-up-opens-its-topic",
        why="every note of run is read by any reader of the workspace, not the catch-up note alone",
        path="blackboard_mcp/store/notes/_addresses.py",
        original="return self.topic == _CATCH_UP_TOPIC and self.path == _CATCH_UP_KEY",
        replacement="return self.topic == _CATCH_UP_TOPIC",
        tests=("tests/test_agents_know_their_workspace.py",),
    ),
    Mutation(
        name="board-page-may-be-framed",
        why="the page's policy stops forbidding framing: only the legacy X-Frame-Options is left",
        path="blackboard_mcp/gateway/page/_routes.py",
        original="form-action 'none'; frame-ancestors 'none'\"",
        replacement="form-action 'none'\"",
        tests=("tests/test_board_headers.py",),
    ),
    Mutation(
        name="search-window-never-widens",
        why="a word the latest writes hold too few of is not looked for in the older notes",
        path="blackboard_mcp/store/search/_search.py",
        original="                if len(group) >= wanted:\n",
        replacement="                if True:\n",
        tests=("tests/test_search_window.py",),
    ),
    Mutation(
        name="earlier-layout-left-unconverted",
        why="notes stored under an earlier release's long field names read as missing",
        path="blackboard_mcp/store/connection/_field_layout.py",
        original="  if redis.call('HEXISTS', key, 'version') == 1 then\n",
        replacement="  if false then\n",
        tests=("tests/test_field_layout.py",),
    ),
    Mutation(
        name="multi-of-several-commands-sends-scripts-by-hash",
        why="a Redis without the script runs the EXEC's other commands, and again on the retry",
        path="blackboard_mcp/store/connection/_tx.py",
        original="        if by_hash and len(queued) == 1:\n",
        replacement="        if by_hash and len(queued) >= 1:\n",
        tests=(_SCRIPTS_BY_HASH,),
    ),
    Mutation(
        name="script-redis-lacks-never-sent-again",
        why="a call whose script Redis has not loaded fails with NOSCRIPT instead of loading it",
        path="blackboard_mcp/store/connection/_scripts.py",
        original="    if not failed:\n        return replies\n",
        replacement="    if True:\n        return replies\n",
        tests=(_SCRIPTS_BY_HASH,),
    ),
    Mutation(
        name="exec-of-a-missing-script-taken-as-run",
        why="a write whose script Redis lacked at EXEC fails, not loaded and run again",
        path="blackboard_mcp/store/connection/_tx.py",
        original="if queued is not self._queued and missed(executed):",
        replacement="if False:",
        tests=(_SCRIPTS_BY_HASH,),
    ),
    Mutation(
        name="search-widens-straight-to-the-whole-workspace",
        why="a word the latest writes lack ranks every match on the board, however many",
        path="blackboard_mcp/store/search/_search.py",
        original="        size *= WIDENING\n",
        replacement="        size = cursor\n",
        tests=("tests/test_search_window.py",),
    ),
    Mutation(
        name="embedded-redis-dies-on-a-socket-it-cannot-make",
        why="serve cannot start on a data dir where Redis cannot make its Unix socket",
        path="blackboard_mcp/store/embedded/_embedded.py",
        original="            if self.socket_path is None or _NO_SOCKET not in exc.message:\n",
        replacement="            if True:\n",
        tests=("tests/test_embedded_socket.py",),
    ),
    Mutation(
        name="read-admitted-in-a-round-trip-of-its-own",
        why="every listing and search pays a round trip to Redis for its admission alone",
        path="blackboard_mcp/store/connection/_board_client.py",
        original="        gate, self._gate = self._gate, None\n        if gate is None:\n",
        replacement="        gate = None\n        if gate is None:\n",
        tests=(_READS_ADMITTED,),
    ),
    Mutation(
        name="read-that-asks-redis-nothing-never-admitted",
        why="a read that fails before it asks Redis anything is never admitted, nor refused",
        path="blackboard_mcp/store/connection/_board_client.py",
        original="        if gate is not None:\n            gate.judge((await super()",
        replacement="        if False:\n            gate.judge((await super()",
        tests=(_READS_ADMITTED,),
    ),
    Mutation(
        name="write-chases-vanishing-scripts",
        why="a write whose script keeps vanishing runs again by hash for as long as it lasts",
        path="blackboard_mcp/store/connection/_tx.py",
        original="                by_hash = False\n",
        replacement="                by_hash = True\n",
        tests=(_SCRIPTS_BY_HASH,),
    ),
    Mutation(
        name="long-write-counted-on-the-loop",
        why="a long note's count holds the event loop: every other call of the process waits",
        path="blackboard_mcp/store/notes/_tokencount.py",
        original="    return await asyncio.to_thread(count_as_json_string, counter, text)\n",
        replacement="    return count_as_json_string(counter, text)\n",
        tests=(_LONG_NOTES,),
    ),
    Mutation(
        name="long-answer-fitted-on-the-loop",
        why="a long read's answer is counted and cut on the event loop, which waits for it",
        path="blackboard_mcp/store/reads/_budget.py",
        original="    return await counted_off_loop(\n        held, functools.partial(fit,",
        replacement="    return await counted_off_loop(\n        0, functools.partial(fit,",
        tests=(_LONG_NOTES,),
    ),
    Mutation(
        name="long-table-parsed-on-the-loop",
        why="a long table's rows are parsed and counted on the event loop when read",
        path="blackboard_mcp/store/reads/_reads.py",
        original="        await counted_off_loop(len(data), give)\n",
        replacement="        await counted_off_loop(0, give)\n",
        tests=(_LONG_NOTES,),
    ),
    Mutation(
        name="long-answer-fitted-under-the-redis-deadline",
        why="a read whose answer takes long to count is answered unavailable, blaming Redis",
        path="blackboard_mcp/store/reads/_reads.py",
        original=(
            "    # Counting and cutting the answer is no Redis operation: outside its deadline.\n"
            "    return (await fit_off_loop("
        ),
        replacement="        return (await fit_off_loop(",
        tests=(_LONG_NOTES,),
    ),
    Mutation(
        name="listing-asks-a-topic-a-round-trip",
        why="a listing of every topic holds the pool and the loop a round trip per topic",
        path="blackboard_mcp/store/reads/_paging.py",
        original="_COMMANDS_PER_ROUND_TRIP = 1000\n",
        replacement="_COMMANDS_PER_ROUND_TRIP = 1\n",
        tests=(
            "tests/test_list_keys.py::test_a_listing_of_every_topic_asks_them_all_in_one_round_trip",
        ),
    ),
    Mutation(
        name="item-estimated-apart-from-the-answer",
        why="a fresh note's item is counted twice a read: as estimated, then in the answer",
        path="blackboard_mcp/store/reads/_budget.py",
        original="        if text.startswith(_ITEM_OPENING):\n",
        replacement="        if False:\n",
        tests=(
            "tests/test_token_accounting.py::test_an_answers_items_are_counted_once_each_when_never_counted_before",
        ),
    ),
    Mutation(
        name="free-port-handed-out-twice",
        why="two servers started side by side are given one port, and one answers for both",
        path="blackboard_mcp/store/embedded/_embedded.py",
        original="            if port not in _handed_out:\n",
        replacement="            if True:\n",
        tests=(
            "tests/test_embedded_persistence.py::test_a_free_port_is_never_one_this_process_handed_out_lately",
        ),
    ),
)
