"""summarize_source: confinement to the source root, refusals, and the exact summaries."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from blackboard_mcp.store._errors import InvalidArgument, NotFound, TooLarge
from blackboard_mcp.store.requests import UpdateState
from blackboard_mcp.store.sources._source import SourceSummary, summarize_source

LIMIT = 100_000


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The source root; tmp_path itself holds files that are outside it."""
    inside = tmp_path / "root"
    inside.mkdir()
    return inside


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def summarize(root: Path, name: str, max_bytes: int = LIMIT) -> SourceSummary:
    return summarize_source(name, root=root, max_bytes=max_bytes)


# --- refusals ---------------------------------------------------------------------------------


def test_disabled_without_root_and_the_hint_names_the_operator() -> None:
    with pytest.raises(InvalidArgument) as info:
        summarize_source("a.txt", root=None, max_bytes=LIMIT)
    assert info.value.message == (
        "source_path is disabled on this board: the operator has not set BB_SOURCE_ROOT"
    )
    assert info.value.details["argument"] == "source_path"
    # Nothing in the argument to fix: the hint says who can, and what works meanwhile.
    assert info.value.hint == (
        "send the content as body instead, or ask the board's operator to set BB_SOURCE_ROOT"
    )


@pytest.mark.parametrize("name", ["", "   "])
def test_source_path_must_be_a_non_empty_string(root: Path, name: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        summarize(root, name)
    assert info.value.message == "source_path must be a non-empty string"


@pytest.mark.parametrize("name", ["", "   ", 3, ["a.txt"], {"path": "a.txt"}])
def test_a_request_whose_source_path_is_not_a_non_empty_string_is_refused(name: object) -> None:
    # The tool's arguments are checked where they arrive; the summary takes a string.
    with pytest.raises(InvalidArgument) as info:
        UpdateState.parse({"uri": "bb://w/t/k", "digest": "d", "source_path": name})
    assert info.value.message == "source_path must be a non-empty string"
    assert info.value.details["argument"] == "source_path"


def test_dotdot_escape_refused_whether_or_not_the_target_exists(root: Path) -> None:
    write(root.parent / "secret.txt", "s3cret\n")
    with pytest.raises(InvalidArgument) as existing:
        summarize(root, "../secret.txt")
    with pytest.raises(InvalidArgument) as missing:
        summarize(root, "../nothing-here.txt")
    assert type(existing.value) is InvalidArgument
    assert type(missing.value) is InvalidArgument
    assert "outside the board's source root" in existing.value.message
    assert "outside the board's source root" in missing.value.message
    assert existing.value.hint == missing.value.hint


@pytest.mark.parametrize("inside", [False, True])
def test_absolute_paths_refused_inside_or_outside(root: Path, inside: bool) -> None:
    secret = write((root if inside else root.parent) / "secret.txt", "s3cret\n")
    with pytest.raises(InvalidArgument) as info:
        summarize(root, str(secret))
    assert type(info.value) is InvalidArgument
    assert info.value.message == f"source_path {str(secret)!r} is absolute"
    assert info.value.hint == "give a path relative to the board's source root"


@pytest.mark.parametrize("name", ["a//b.txt", "a/b.txt/", "./b.txt", "a/./b.txt", "a/"])
def test_empty_and_dot_components_refused(root: Path, name: str) -> None:
    write(root / "a" / "b.txt", "hello\n")
    write(root / "b.txt", "hello\n")
    with pytest.raises(InvalidArgument) as info:
        summarize(root, name)
    assert info.value.message == f"source_path {name!r} has an empty or '.' component"


def test_dotdot_refused_even_when_it_would_come_back_inside(root: Path) -> None:
    write(root / "a.txt", "hello\n")
    with pytest.raises(InvalidArgument) as info:
        summarize(root, "sub/../a.txt")
    assert "outside the board's source root" in info.value.message


def test_path_longer_than_path_max_refused_before_any_open(root: Path) -> None:
    name = "a/" * 2048 + "b.txt"
    with pytest.raises(InvalidArgument) as info:
        summarize(root, name)
    assert info.value.message == f"source_path has {len(name)} characters; the limit is 4096"


def test_json_integer_past_python_digit_limit_refused(root: Path) -> None:
    write(root / "bigint.json", '{"n": ' + "9" * 5000 + "}")
    with pytest.raises(InvalidArgument) as info:
        summarize(root, "bigint.json")
    assert info.value.message == (
        "JSON value cannot be read: Exceeds the limit (4300 digits) for integer string "
        "conversion: value has 5000 digits"
    )


def test_json_lone_surrogates_are_shown_escaped(root: Path) -> None:
    write(root / "s.json", '{"k\\ud800": "v\\udfff"}')
    body = summarize(root, "s.json").body
    assert body is not None
    assert '"k\\ud800": string (length 2) "v\\udfff"' in body
    body.encode("utf-8")  # storable


def test_nul_refused(root: Path) -> None:
    with pytest.raises(InvalidArgument) as info:
        summarize(root, "a\x00.txt")
    assert info.value.message == "source_path may not contain a NUL character"


SYMLINK_REFUSAL = "goes through a symbolic link; links are not followed"


def test_symlinked_file_pointing_outside_refused(root: Path) -> None:
    secret = write(root.parent / "secret.txt", "s3cret\n")
    (root / "link.txt").symlink_to(secret)
    with pytest.raises(InvalidArgument) as info:
        summarize(root, "link.txt")
    assert SYMLINK_REFUSAL in info.value.message


def test_symlinked_directory_refused_whether_or_not_the_target_exists(root: Path) -> None:
    write(root.parent / "elsewhere" / "secret.txt", "s3cret\n")
    (root / "dir").symlink_to(root.parent / "elsewhere", target_is_directory=True)
    with pytest.raises(InvalidArgument) as existing:
        summarize(root, "dir/secret.txt")
    with pytest.raises(InvalidArgument) as missing:
        summarize(root, "dir/missing.txt")
    assert type(missing.value) is InvalidArgument
    assert SYMLINK_REFUSAL in existing.value.message
    assert SYMLINK_REFUSAL in missing.value.message


def test_symlink_staying_inside_is_refused_too(root: Path) -> None:
    # Links are never followed, even harmless ones: a link's target can change between
    # any check and the open, so the only safe rule is none at all.
    write(root / "real.md", "# Real\n")
    (root / "alias.md").symlink_to(root / "real.md")
    (root / "alias-dir").symlink_to(root, target_is_directory=True)
    for name in ("alias.md", "alias-dir/real.md"):
        with pytest.raises(InvalidArgument) as info:
            summarize(root, name)
        assert SYMLINK_REFUSAL in info.value.message
    assert summarize(root, "real.md").relative_path == "real.md"


def test_root_given_through_a_symlink_is_fine(root: Path) -> None:
    # The root is the operator's setting, not the caller's: it may be a link.
    write(root / "a.txt", "hello\n")
    alias = root.parent / "root-alias"
    alias.symlink_to(root, target_is_directory=True)
    assert summarize(alias, "a.txt").relative_path == "a.txt"


def test_hard_linked_file_refused(root: Path) -> None:
    secret = write(root.parent / "secret.txt", "s3cret\n")
    (root / "hard.txt").hardlink_to(secret)
    with pytest.raises(InvalidArgument) as info:
        summarize(root, "hard.txt")
    assert "more than one hard link" in info.value.message


def test_fifo_refused_without_blocking(root: Path) -> None:
    os.mkfifo(root / "pipe.txt")  # no writer: a blocking open would wait for ever
    with pytest.raises(InvalidArgument) as info:
        summarize(root, "pipe.txt")
    assert info.value.message == "source_path 'pipe.txt' is not a regular file"


def test_file_used_as_a_directory_is_not_found(root: Path) -> None:
    write(root / "a.txt", "hello\n")
    with pytest.raises(NotFound):
        summarize(root, "a.txt/b.txt")


def test_unreadable_file_refused(root: Path) -> None:
    locked = write(root / "locked.txt", "hello\n")
    locked.chmod(0)
    if os.access(locked, os.R_OK):
        pytest.skip("running as a user who reads files whatever their mode (root)")
    with pytest.raises(InvalidArgument) as info:
        summarize(root, "locked.txt")
    assert "permission denied" in info.value.message


def test_missing_file_inside_root(root: Path) -> None:
    with pytest.raises(NotFound) as info:
        summarize(root, "nope/missing.txt")
    assert info.value.message == "source_path 'nope/missing.txt' does not exist"
    assert info.value.details["argument"] == "source_path"


def test_directory_refused(root: Path) -> None:
    (root / "docs").mkdir()
    with pytest.raises(InvalidArgument) as info:
        summarize(root, "docs")
    assert info.value.message == "source_path 'docs' is not a regular file"


def test_too_large_names_size_and_limit(root: Path) -> None:
    write(root / "big.txt", "x" * 101)
    with pytest.raises(TooLarge) as info:
        summarize(root, "big.txt", max_bytes=100)
    assert info.value.message == "the file has 101 bytes; the limit for source_path is 100"
    assert info.value.details["size_bytes"] == 101
    assert info.value.details["max_bytes"] == 100


def test_exactly_at_the_limit_is_accepted(root: Path) -> None:
    write(root / "edge.txt", "x" * 100)
    assert summarize(root, "edge.txt", max_bytes=100).size_bytes == 100


def test_binary_refused(root: Path) -> None:
    (root / "blob.txt").write_bytes(b"abc\x00def")
    with pytest.raises(InvalidArgument) as info:
        summarize(root, "blob.txt")
    assert info.value.message == "binary files are not summarised"


def test_non_utf8_refused(root: Path) -> None:
    (root / "latin.txt").write_bytes("caf\u00e9\n".encode("latin-1"))
    with pytest.raises(InvalidArgument) as info:
        summarize(root, "latin.txt")
    assert info.value.message == "not UTF-8 text"
    assert info.value.details["byte_offset"] == 3


# --- text and markdown ------------------------------------------------------------------------

MARKDOWN = """\
Intro line before any heading.

# Install guide

Run the installer.

```sh
# not a heading
```

## Steps ##
### Details
"""


def test_markdown_title_headings_and_first_lines(root: Path) -> None:
    data = MARKDOWN.encode()
    write(root / "docs" / "guide.md", MARKDOWN)
    result = summarize(root, "docs/guide.md")
    assert result.kind == "summary"
    assert result.table is None
    assert result.relative_path == "docs/guide.md"
    assert result.line_count == 12
    assert result.size_bytes == len(data)
    assert result.sha256 == hashlib.sha256(data).hexdigest()
    assert result.body == "\n".join(
        [
            f"docs/guide.md: 12 lines, {len(data)} bytes",
            "title: Install guide",
            "headings:",
            "  # Install guide",
            "  ## Steps",
            "  ### Details",
            "first lines:",
            "  Intro line before any heading.",
            "  # Install guide",
            "  Run the installer.",
            "  ```sh",
            "  # not a heading",
            "  ```",
            "  ## Steps ##",
            "  ### Details",
        ]
    )


def test_plain_text_title_is_first_non_empty_line(root: Path) -> None:
    write(root / "notes.txt", "\n\n  First real line  \nsecond")
    result = summarize(root, "notes.txt")
    assert result.line_count == 4
    assert result.body == "\n".join(
        [
            "notes.txt: 4 lines, 28 bytes",
            "title: First real line",
            "headings: (none)",
            "first lines:",
            "    First real line",
            "  second",
        ]
    )


def test_empty_file(root: Path) -> None:
    write(root / "empty.txt", "")
    result = summarize(root, "empty.txt")
    assert result.line_count == 0
    assert result.body == (
        "empty.txt: 0 lines, 0 bytes\ntitle: (none)\nheadings: (none)\nfirst lines: (none)"
    )


def test_first_lines_limited_and_cut(root: Path) -> None:
    lines = [f"line {i} " + "y" * 300 for i in range(40)]
    write(root / "long.txt", "\n".join(lines))
    body = summarize(root, "long.txt").body
    assert body is not None
    shown = body.split("first lines:\n")[1].split("\n")
    assert len(shown) == 15
    assert shown[0] == "  " + lines[0][:199] + "…"
    assert len(body) < 4000


def test_body_stays_under_4000_characters(root: Path) -> None:
    text = "\n".join(f"## heading {i} " + "z" * 250 for i in range(60))
    write(root / "many.md", text)
    body = summarize(root, "many.md").body
    assert body is not None
    assert len(body) < 4000
    assert body.endswith("\n[summary truncated]")
    assert body.count("\n  ## heading ") < 30


# --- CSV and TSV ------------------------------------------------------------------------------


def test_csv_header_and_25_rows_gives_20_sample_rows(root: Path) -> None:
    rows = ["id,name,score"] + [f"{i},name{i},{i * 10}" for i in range(25)]
    write(root / "data" / "scores.csv", "\r\n".join(rows) + "\r\n")
    result = summarize(root, "data/scores.csv")
    assert result.kind == "table"
    assert result.body is None
    assert result.table is not None
    assert result.table.columns == ("id", "name", "score")
    assert len(result.table.rows) == 20
    assert result.table.rows[0] == ("0", "name0", "0")
    assert result.table.rows[19] == ("19", "name19", "190")
    assert result.line_count == 25
    assert result.relative_path == "data/scores.csv"


def test_csv_cells_with_tab_and_newline_are_escaped(root: Path) -> None:
    write(root / "odd.csv", 'a,b\n"x\ty","line1\nline2"\n')
    table = summarize(root, "odd.csv").table
    assert table is not None
    assert table.rows == (("x\\ty", "line1\\nline2"),)
    assert table.to_tsv() == "a\tb\nx\\ty\tline1\\nline2"


def test_csv_rows_padded_and_truncated_to_header_width(root: Path) -> None:
    write(root / "ragged.csv", "a,b,c\n1\n1,2,3,4\n\n5,6\n")
    result = summarize(root, "ragged.csv")
    assert result.table is not None
    assert result.table.rows == (("1", "", ""), ("1", "2", "3"), ("5", "6", ""))
    assert result.line_count == 3


def test_csv_blank_and_duplicate_header_names_made_unique(root: Path) -> None:
    write(root / "names.csv", "a,,a\n1,2,3\n")
    table = summarize(root, "names.csv").table
    assert table is not None
    assert table.columns == ("a", "column_2", "a_2")


def test_tsv_uses_tab_delimiter(root: Path) -> None:
    write(root / "t.tsv", "city\tcount, approx\nParis\t1,000\nRome\t2\n")
    result = summarize(root, "t.tsv")
    assert result.kind == "table"
    assert result.table is not None
    assert result.table.columns == ("city", "count, approx")
    assert result.table.rows == (("Paris", "1,000"), ("Rome", "2"))
    assert result.line_count == 2


def test_csv_without_header_falls_back_to_text_summary(root: Path) -> None:
    write(root / "blank.csv", "")
    result = summarize(root, "blank.csv")
    assert result.kind == "summary"
    assert result.table is None
    assert result.body == (
        "blank.csv: 0 lines, 0 bytes\ntitle: (none)\nheadings: (none)\nfirst lines: (none)"
    )


# --- JSON -------------------------------------------------------------------------------------


def test_json_object_describes_keys(root: Path) -> None:
    doc = {"name": "x" * 70, "tags": [1, 2, 3], "meta": {"a": 1, "b": 2}, "n": 4.5, "ok": True}
    doc["none"] = None
    text = json.dumps(doc)
    write(root / "doc.json", text)
    result = summarize(root, "doc.json")
    assert result.kind == "summary"
    assert result.line_count == 1
    assert result.body == "\n".join(
        [
            f"doc.json: JSON object with 6 keys, {len(text)} bytes",
            "keys:",
            '  "name": string (length 70) "' + "x" * 60 + '"',
            '  "tags": array (length 3)',
            '  "meta": object (2 keys)',
            '  "n": number',
            '  "ok": boolean',
            '  "none": null',
        ]
    )


def test_json_object_lists_at_most_50_keys(root: Path) -> None:
    write(root / "wide.json", json.dumps({f"k{i}": i for i in range(60)}))
    body = summarize(root, "wide.json").body
    assert body is not None
    lines = body.split("\n")
    assert lines[-2] == '  "k49": number'
    assert lines[-1] == "  ... and 10 more keys"


def test_json_array_describes_first_element(root: Path) -> None:
    text = json.dumps([{"id": 1, "label": "a"}, {"id": 2}])
    write(root / "list.json", text)
    assert summarize(root, "list.json").body == "\n".join(
        [
            f"list.json: JSON array of length 2, {len(text)} bytes",
            "first element: object (2 keys)",
            'first element keys: "id", "label"',
        ]
    )


def test_json_invalid_names_line_and_column(root: Path) -> None:
    write(root / "bad.json", '{\n  "a": 1,\n  oops\n}\n')
    with pytest.raises(InvalidArgument) as info:
        summarize(root, "bad.json")
    assert info.value.message.startswith("invalid JSON at line 3 column 3: ")
    assert info.value.details["line"] == 3
    assert info.value.details["column"] == 3


# --- determinism ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("a.md", MARKDOWN),
        ("b.csv", "x,y\n1,2\n3,4\n"),
        ("c.json", json.dumps({"k": [1, 2], "s": "v"})),
    ],
)
def test_same_file_gives_the_same_summary(root: Path, name: str, text: str) -> None:
    write(root / name, text)
    assert summarize(root, name) == summarize(root, name)
