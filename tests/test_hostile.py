"""Hostile input: a clear error naming what was wrong, or a correct result; never a
traceback, never a silent loss. One test per way in which this once went wrong."""

from __future__ import annotations

import json
import os
import sqlite3
import struct
import time
import zlib
from pathlib import Path

import pytest

import glyphpack
from glyphpack import HistoryError, LimitError, Message, PageError, StoreError, Text, ToolCall, ToolResult, Workspace
from glyphpack._cli import main


def turn(i: int) -> list[Message]:
    return [Message("user", f"question {i}", id=f"u{i}"), Message("assistant", f"answer {i}", id=f"a{i}")]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The CLI in-process: its exit code, stdout and stderr (a traceback would raise here)."""
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------ silent loss via the API


def test_saving_a_trimmed_view_is_refused(tmp_path):
    with Workspace(tmp_path) as ws:
        history = [m for i in range(10) for m in turn(i)]
        ws.save("c", "a", history, revision=0)
        ws.checkpoint("c", "a", "early")
        view = ws.load("c", "a", keep=4)
        assert view.trimmed == 16
        with pytest.raises(StoreError, match="would drop 16 stored messages.*replace=True"):
            ws.save("c", "a", list(view.messages) + turn(10), revision=view.revision)
        stored = ws.load("c", "a")
        assert list(stored.messages) == history and stored.checkpoints == {"early": "a9"}
        # said on purpose, it replaces
        ws.save("c", "a", list(view.messages) + turn(10), revision=view.revision, replace=True)
        assert len(ws.load("c", "a").messages) == 6


def test_appending_to_a_full_load_needs_no_flag(tmp_path):
    with Workspace(tmp_path) as ws:
        ws.save("c", "a", turn(0), revision=0)
        current = ws.load("c", "a")
        ws.save("c", "a", list(current.messages) + turn(1), revision=current.revision)
        assert len(ws.load("c", "a").messages) == 4


# ----------------------------------------------------------------- wrong-schema transcripts


def transcript(messages: object, **fields: object) -> dict:
    return {"format": "glyphpack-transcript", "version": 1, "revision": 1, "checkpoints": {}, "messages": messages} | fields


BAD_TRANSCRIPTS = {
    "content is a string": transcript([{"role": "user", "content": "hi"}]),
    "content is a number": transcript([{"role": "user", "content": 12}]),
    "tool result content is a string": transcript(
        [
            {"role": "assistant", "content": [{"type": "tool_call", "id": "c1", "name": "ls", "arguments": {}}]},
            {"role": "tool", "content": [{"type": "tool_result", "call_id": "c1", "content": "text"}]},
        ]
    ),
    "revision is true": transcript([], revision=True),
    "text is a number": transcript([{"role": "user", "content": [{"type": "text", "text": 12}]}]),
    "orphan tool result": transcript([{"role": "tool", "content": [{"type": "tool_result", "call_id": "x", "content": []}]}]),
    "bad base64": transcript([{"role": "user", "content": [{"type": "image", "media_type": "image/png", "data": "%%%"}]}]),
    "messages nested too deep": None,
}


@pytest.mark.parametrize("name", BAD_TRANSCRIPTS)
def test_wrong_schema_transcripts_are_named_and_left_alone(tmp_path, capsys, name):
    with Workspace(tmp_path / "ws") as ws:
        path = ws.transcript_path("c", "a")
        path.parent.mkdir(parents=True)
        document = BAD_TRANSCRIPTS[name]
        raw = json.dumps(document).encode() if document is not None else b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        path.write_bytes(raw)
        with pytest.raises(StoreError, match=str(path)):
            ws.load("c", "a")
        with pytest.raises(StoreError, match=str(path)):
            ws.save("c", "a", turn(0), revision=1)
        assert path.read_bytes() == raw
    for command in (["context", str(path), "--model", "claude-sonnet-4-5"], ["shake", str(path), "--model", "gpt-5.4"],
                    ["compact", str(path), "--model", "gpt-5.4", "--budget", "1000"]):
        code, out, err = run(command, capsys)
        assert code == 2 and str(path) in err and err.count("\n") == 1, err


# ------------------------------------------------------------------------ lone surrogates


def test_lone_surrogates_are_stored_and_read_back(tmp_path, capsys):
    odd = [Message("user", "half a pair: \ud800 and \udfff", id="u0"), Message("assistant", "ok \udc80", id="a0")]
    with Workspace(tmp_path / "ws") as ws:
        ws.save("c", "a", odd, revision=0)
        assert list(ws.load("c", "a").messages) == odd
        assert ws.tree.path("c") == odd  # the save recorded them in the tree too
    source = tmp_path / "surrogate.json"
    source.write_text(json.dumps([glyphpack._history.codec.message_to_json(m) for m in odd]))
    code, out, err = run(["compact", str(source), "--model", "claude-sonnet-4-5", "--budget", "100000", "--out", str(tmp_path / "view")], capsys)
    assert code == 0, err
    view = json.loads((tmp_path / "view" / "view.json").read_text())
    assert view[0]["content"][0]["text"] == "half a pair: \ud800 and \udfff"


# ------------------------------------------------------------------------------ output paths


def test_output_paths_fail_with_one_line_and_leave_nothing_behind(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("hello")
    a_file = tmp_path / "file.txt"
    a_file.write_text("keep me")
    history = tmp_path / "h.json"
    history.write_text(json.dumps([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]))
    with Workspace(tmp_path / "ws") as ws:
        ws.tree.append(ws.tree.create("c"), Message("user", "hello"))
    cases = [
        ["render", str(text), "--out", str(a_file / "x")],
        ["render", str(text), "--contact-sheet", str(tmp_path / "missing" / "x.png")],
        ["compact", str(history), "--model", "gpt-5.4", "--budget", "1000", "--out", str(a_file)],
        ["export", str(tmp_path / "ws"), "c", "--out", str(tmp_path / "missing" / "c.md")],
        ["export", str(tmp_path / "ws"), "c", "--out", str(tmp_path)],
        ["generate-session", str(tmp_path / "missing" / "s.json"), "--chars", "1000"],
    ]
    for argv in cases:
        before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
        code, out, err = run(argv, capsys)
        assert code == 2 and err.startswith("glyphpack: error: ") and err.count("\n") == 1, (argv, err)
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before, argv
    assert a_file.read_text() == "keep me"


def test_a_failed_write_leaves_no_partial_output(tmp_path, capsys, monkeypatch):
    """The view is written to a temporary file and renamed: a failure mid-write leaves
    neither a truncated view.json nor a stray temporary file."""
    history = tmp_path / "h.json"
    history.write_text(json.dumps([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]))
    real_replace = os.replace

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device", str(dst))

    monkeypatch.setattr(os, "replace", failing_replace)
    code, out, err = run(["shake", str(history), "--model", "gpt-5.4", "--out", str(tmp_path / "view")], capsys)
    monkeypatch.setattr(os, "replace", real_replace)
    assert code == 2 and "No space left on device" in err
    assert not any(p.is_file() for p in (tmp_path / "view").rglob("*")) if (tmp_path / "view").exists() else True


# ------------------------------------------------------------------------------------ images


def png_header_only(width: int, height: int) -> bytes:
    """A valid PNG signature and IHDR declaring width x height, with a tiny IDAT."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("size", [(50_000, 50_000), (13_000, 13_000), (100_000_000, 8)])
def test_reading_a_huge_declared_image_is_refused_before_decoding(tmp_path, capsys, size):
    png = tmp_path / "bomb.png"
    png.write_bytes(png_header_only(*size))
    started = time.perf_counter()
    with pytest.raises(PageError, match=f"{size[0]}x{size[1]}"):
        glyphpack.read_page(png.read_bytes())
    code, out, err = run(["read", str(png)], capsys)
    assert code == 2 and str(png) in err and "larger than any page" in err
    assert time.perf_counter() - started < 2  # a guard, not a benchmark: decoding 13000^2 took 4.5 s


# ------------------------------------------------------------------------------------- sizes


@pytest.mark.parametrize("page_size", [(1568, 100_000_000), (100_000_000, 8), (0, 784), (-5, 784)])
def test_page_sizes_beyond_any_page_are_refused_before_work(page_size, capsys, tmp_path):
    with pytest.raises(glyphpack.GlyphpackError, match="page size"):
        glyphpack.render("hello world", page_size=page_size)
    (tmp_path / "in.txt").write_text("hello world")
    code, out, err = run(["render", str(tmp_path / "in.txt"), f"--page-size={page_size[0]}x{page_size[1]}"], capsys)
    assert code == 2 and "page size" in err


def test_max_pages_is_checked_before_normalizing(monkeypatch):
    import glyphpack._render.render as render_module

    def no_normalizing(*args, **kwargs):
        raise AssertionError("normalized a text that is certainly over max_pages")

    monkeypatch.setattr(render_module, "normalize", no_normalizing)
    with pytest.raises(LimitError, match="at least 4 pages"):
        glyphpack.render("x" * 100_000, max_pages=3)


# ---------------------------------------------------------------------------- damaged SQLite


def damaged_workspace(tmp_path: Path) -> Path:
    ws_path = tmp_path / "ws"
    with Workspace(ws_path) as ws:
        c = ws.tree.create("c")
        for i in range(300):
            ws.tree.append(c, Message("user", f"message {i} " + "x" * 200, id=f"m{i}"))
    db = ws_path / "tree.sqlite3"
    with sqlite3.connect(db) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    page = 4096
    for offset in range(2 * page, len(data) - page, 3 * page):  # scribble over pages past the header
        data[offset + 100 : offset + 600] = os.urandom(500)
    db.write_bytes(bytes(data))
    return ws_path


@pytest.mark.parametrize(
    "argv",
    [["tree", "{ws}"], ["tree", "{ws}", "c"], ["branch", "{ws}", "c", "m1"], ["export", "{ws}", "c"], ["fork", "{ws}", "c"]],
)
def test_a_damaged_database_is_reported_as_damaged(tmp_path, capsys, argv):
    ws_path = damaged_workspace(tmp_path)
    code, out, err = run([a.format(ws=ws_path) for a in argv], capsys)
    assert code == 2 and "damaged" in err and str(ws_path / "tree.sqlite3") in err and err.count("\n") == 1, err


def test_an_empty_database_file_is_not_a_workspace_and_is_not_written(tmp_path, capsys):
    ws_path = tmp_path / "ws"
    ws_path.mkdir()
    (ws_path / "tree.sqlite3").write_bytes(b"")
    code, out, err = run(["tree", str(ws_path)], capsys)
    assert code == 2 and "empty" in err
    assert (ws_path / "tree.sqlite3").read_bytes() == b""


def test_read_only_commands_never_write(tmp_path, capsys):
    ws_path = tmp_path / "ws"
    with Workspace(ws_path) as ws:
        ws.tree.append(ws.tree.create("c"), Message("user", "hello"))
    snapshot = {p: p.read_bytes() for p in ws_path.rglob("*") if p.is_file()}
    for argv in (["tree", str(ws_path)], ["export", str(ws_path), "c", "--format", "json"]):
        code, out, err = run(argv, capsys)
        assert code == 0, err
    assert {p: p.read_bytes() for p in ws_path.rglob("*") if p.is_file()} == snapshot


# ----------------------------------------------------------------------------- temporaries


def test_cleanup_touches_only_the_savers_own_temporaries(tmp_path):
    with Workspace(tmp_path) as ws:
        ws.save("c", "a.json.x", turn(0), revision=0)
        folder = ws.transcript_path("c", "a").parent
        in_flight = folder / ".a.json.x.json.k3j9x2ab.tmp"  # another agent's write under way
        crashed = folder / ".a.json.q8w7e6r5.tmp"  # agent a's own leftover
        in_flight.write_bytes(b"{}")
        crashed.write_bytes(b"{}")
        ws.save("c", "a", turn(0), revision=0)
        assert in_flight.exists() and not crashed.exists()


# ------------------------------------------------------------------------------------- ids


@pytest.mark.parametrize("bad", ["abc\n", "", "a/b", "..", ".hidden", "x" * 129])
def test_hostile_ids_are_refused(tmp_path, bad):
    with Workspace(tmp_path) as ws:
        with pytest.raises(StoreError, match="is not allowed"):
            ws.save(bad, "a", turn(0), revision=0)
        with pytest.raises(StoreError, match="is not allowed"):
            ws.tree.create(bad)
    assert not any("\n" in p.name for p in tmp_path.rglob("*"))


def test_messages_of_the_wrong_shape_are_history_errors():
    for build in (
        lambda: Message("user", 12),  # type: ignore[arg-type]
        lambda: Message("robot", "hi"),  # type: ignore[arg-type]
        lambda: ToolResult("c", "text"),  # type: ignore[arg-type]
        lambda: ToolCall("c", "ls", "not a dict"),  # type: ignore[arg-type]
        lambda: Text(None),  # type: ignore[arg-type]
    ):
        with pytest.raises(HistoryError):
            build()
