"""What an import returns, the repair every import goes through, and JSONL reading."""

from __future__ import annotations

import codecs
import collections
import dataclasses
import datetime
import json
import math
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._errors import HistoryError
from .._history.imported import ImportedAgent, ImportReport, Usage
from .._history.messages import Block, Image, Message, Text, Thinking, ToolCall, ToolResult
from .._wire.common import tool_arguments

#: The text of a result made up for a call that never got one.
MISSING_RESULT = "[no result: the session ended this turn before the tool returned]"

#: Where an OpenAI Chat-style usage object counts the cached part of the prompt (DeepSeek
#: and LiteLLM write it there too).
CHAT_CACHED = ("prompt_tokens_details", "cached_tokens")


def measured_usage(
    start: int, end: int, usage: object, total: Sequence[str], read: Sequence[str] = (), written: Sequence[str] = ()
) -> Usage | None:
    """The record a response's ``usage`` object makes: its input tokens are the sum of
    the ``total`` keys; ``read`` and ``written`` are paths of keys to the cached counts
    (``("prompt_tokens_details", "cached_tokens")``). None when it counts nothing."""
    tokens = input_tokens(usage, *total)
    if not tokens:
        return None
    return Usage(start, end, tokens, count_at(usage, read), count_at(usage, written))


def named_model(value: object) -> str | None:
    """``value`` when it names a model: a non-empty string, not a harness's own marker in
    angle brackets (Claude Code writes ``<synthetic>`` for messages no model wrote)."""
    if isinstance(value, str) and value.strip() and not value.startswith("<"):
        return value.strip()
    return None


def count_at(record: object, path: Sequence[str]) -> int:
    """The token count at ``path`` (keys) in a usage record; 0 when there is none."""
    for key in path:
        record = record.get(key) if isinstance(record, dict) else None
    return _count(record)


def _count(value: object) -> int:
    """``value`` when it is a count of tokens (a positive int), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class Tally:
    """Counts gathered while importing: what was skipped, repaired and made unique."""

    def __init__(self) -> None:
        self.skipped: collections.Counter[str] = collections.Counter()
        self.repaired: collections.Counter[str] = collections.Counter()
        self.made_unique = 0
        self.compactions = 0
        self.assumed: dict[str, None] = {}  # ordered, each said once

    def assume(self, what: str) -> None:
        self.assumed[what] = None

    def skip(self, reason: str, count: int = 1) -> None:
        if count > 0:
            self.skipped[reason] += count

    def repair(self, what: str, count: int = 1) -> None:
        self.repaired[what] += count

    def unrepair(self, what: str) -> None:
        """Take back one repair counted as ``what`` (a later line undid it)."""
        self.repaired[what] -= 1
        if self.repaired[what] <= 0:
            del self.repaired[what]

    def report(self, format: str, agents: Sequence[ImportedAgent], branches: int) -> ImportReport:
        every = [m for agent in agents for m in agent.messages]
        blocks = [b for m in every for b in m.content]
        return ImportReport(
            format=format,
            messages=len(every),
            tool_calls=sum(isinstance(b, ToolCall) for b in blocks),
            tool_results=sum(isinstance(b, ToolResult) for b in blocks),
            images=sum(len(m.images) for m in every),
            thinking=sum(isinstance(b, Thinking) or b.tag == "redacted_thinking" for b in blocks),
            agents=tuple(a.name for a in agents),
            branches=branches,
            compactions=self.compactions,
            skipped=dict(self.skipped),
            repaired=dict(self.repaired),
            made_unique=self.made_unique,
            assumed=tuple(self.assumed),
            cost=None if all(a.cost is None for a in agents) else sum(a.cost or 0.0 for a in agents),
        )


def repair(messages: Sequence[Message], tally: Tally) -> list[Message]:
    """The history made valid for every provider, each change counted in ``tally``:

    - a reused tool call id is renamed (``ID#2``), and the results that follow it are
      paired with the renamed call;
    - a result whose call is not open (a shell command the user ran, a call the file
      lost, a result written without a call id: ``""``) is kept as the user's text,
      naming the call id, so no output is lost;
    - a call still unanswered when the next assistant message (or the end) comes gets
      an error result saying so, right after its message; its result, when the file
      writes it later (parallel calls whose outputs come after another turn began),
      takes that stand-in's place;
    - a message left with no content is dropped.
    """
    seen: collections.Counter[str] = collections.Counter()
    open_calls: dict[str, str] = {}  # id in the file -> id in the history, for calls awaiting results
    stood_in: dict[str, tuple[int, str]] = {}  # id in the file -> (where in out, id in the history), for stand-ins made
    out: list[Message] = []

    def answer_open_calls() -> None:
        if not open_calls:
            return
        results = tuple(ToolResult(new, (Text(MISSING_RESULT),), True) for new in open_calls.values())
        tally.repair("unanswered tool calls given an error result", len(results))
        stood_in.update((old, (len(out), new)) for old, new in open_calls.items())
        out.append(Message("tool", results, id=f"{out[-1].id}-missing-results" if out else "missing-results"))
        open_calls.clear()

    def answer_late(result: ToolResult) -> bool:
        """Put ``result`` in the place of the stand-in its call was given, if it was."""
        if result.call_id not in stood_in:
            return False
        where, new = stood_in.pop(result.call_id)
        message = out[where]
        content = tuple(dataclasses.replace(result, call_id=new) if b.call_id == new else b for b in message.tool_results)
        stand_ins_left = any(b.text == MISSING_RESULT and b.is_error for b in content)
        late_id = message.id if stand_ins_left else message.id.removesuffix("-missing-results") + "-late-results"
        out[where] = dataclasses.replace(message.with_content(content), id=late_id)
        tally.unrepair("unanswered tool calls given an error result")
        tally.repair("tool results written after their call's turn put in place of the stand-in")
        return True

    for message in messages:
        if message.role == "assistant":
            answer_open_calls()
        content: list[Block] = []
        unpaired: list[Block] = []
        superseded: list[ToolResult] = []  # calls whose id came again in this message, answered after it
        moved = False  # a result put in its stand-in's place, earlier
        for block in message.content:
            if isinstance(block, ToolResult):
                new = open_calls.pop(block.call_id, None)
                if new is None and answer_late(block):
                    moved = True
                    continue
                if new is None:
                    tally.repair("tool results without an open call kept as user text")
                    unpaired.extend(_as_user_content(block))
                    continue
                content.append(block if new == block.call_id else dataclasses.replace(block, call_id=new))
            elif isinstance(block, ToolCall):
                seen[block.id] += 1
                new = block.id if seen[block.id] == 1 else f"{block.id}#{seen[block.id]}"
                if new != block.id:
                    tally.made_unique += 1
                if block.id in open_calls:  # the same id again before its result: answer the first
                    tally.repair("unanswered tool calls given an error result")
                    superseded.append(ToolResult(open_calls.pop(block.id), (Text(MISSING_RESULT),), True))
                open_calls[block.id] = new
                content.append(block if new == block.id else dataclasses.replace(block, id=new))
            else:
                content.append(block)
        if unpaired and message.role != "tool":
            content = unpaired + content  # a user message may hold text and images
            unpaired = []
        if not content and not unpaired:
            if message.content and not moved:
                tally.repair("messages left empty dropped")
            continue
        if content:
            out.append(message if tuple(content) == message.content else message.with_content(tuple(content)))
        if superseded:  # after the message that made the calls, never before it
            out.append(Message("tool", tuple(superseded), id=f"{message.id}-superseded-results"))
        if unpaired:
            out.append(Message("user", tuple(unpaired), id=f"{message.id}-unpaired"))
    answer_open_calls()
    return _split_mixed_tool_messages(out)


def _as_user_content(result: ToolResult) -> list[Block]:
    """A result whose call is not in the history, as user content that names the call
    (an empty call id: the file named none)."""
    status = "error" if result.is_error else "result"
    call = f"for call {result.call_id!r}, which is not in this history" if result.call_id else "without a call id"
    return [Text(f"[tool {status} {call}]\n{result.text}"), *result.images()]


def _split_mixed_tool_messages(messages: list[Message]) -> list[Message]:
    """Tool results ride in ``tool`` messages only: a user message that carries results
    (the Anthropic shape) becomes a ``tool`` message followed by the user's own blocks."""
    out: list[Message] = []
    for message in messages:
        results = tuple(b for b in message.content if isinstance(b, ToolResult))
        if message.role == "tool" or not results:
            out.append(message)
            continue
        others = tuple(b for b in message.content if not isinstance(b, ToolResult))
        out.append(Message("tool", results, id=f"{message.id}-results"))
        if others:
            out.append(message.with_content(others))
    return out


def usage_in(
    repaired: Sequence[Message], original: Sequence[Message], usage: Sequence[Usage]
) -> tuple[Usage, ...]:
    """Usage records (start, end, tokens) over ``original`` moved to the positions of the
    same messages in ``repaired``; one record per message (a response written as several
    lines repeats its usage)."""
    position = {m.id: n for n, m in enumerate(repaired)}
    moved: dict[int, Usage] = {}
    for record in usage:
        start, end = record.start, record.end
        if 0 <= start <= end < len(original) and original[end].id in position:
            first = next((position[m.id] for m in original[start:end] if m.id in position), position[original[end].id])
            moved[position[original[end].id]] = record._replace(start=first, end=position[original[end].id])
    return tuple(record for _, record in sorted(moved.items()))


def compaction_ids(repaired: Sequence[Message], original: Sequence[Message], starts: Sequence[int]) -> tuple[str, ...]:
    """The harness's compactions as ids in ``repaired``: each start (an index into
    ``original``: the first message requests carried after it) named by the first of
    ``original[start:]`` still in ``repaired``; a start with nothing after it, or at 0
    (nothing before it was put away), is left out."""
    kept = {m.id for m in repaired}
    out: list[str] = []
    for start in starts:
        found = next((m.id for m in original[start:] if m.id in kept), None)
        if start > 0 and found is not None and found != repaired[0].id and found not in out:
            out.append(found)
    return tuple(out)


def jsonl_records(data: bytes, tally: Tally | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, object) for each JSON object of a JSONL file (``where`` is its line
    number, ``12.2`` for a line's second record), read as harnesses
    write them: a byte order mark, CRLF line ends, and several records on one line with
    no newline between them (pi writes such lines) are taken in, each repair counted;
    lines that are not JSON objects are skipped and counted."""
    tally = tally if tally is not None else Tally()
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
        tally.repair("byte order marks removed")
    if b"\r\n" in data:
        tally.repair("CRLF line ends read as LF")
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        records = _records_on_line(raw)
        if records is None:
            tally.skip("lines that are not JSON")
            continue
        if len(records) > 1:
            tally.repair("records glued on one line read apart", len(records) - 1)
        for number, record in enumerate(records, start=1):
            if not isinstance(record, dict):
                tally.skip("lines that are not JSON objects")
                continue
            yield (f"{lineno}" if number == 1 else f"{lineno}.{number}"), record


_DECODER = json.JSONDecoder()


def _records_on_line(raw: bytes) -> list[Any] | None:
    """The JSON values on one line: one, or several written back to back; None when
    the line is anything else (a truncated record, prose)."""
    try:
        return [json.loads(raw)]
    except (ValueError, RecursionError):
        pass
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    values, position = [], 0
    while position < len(text):
        try:
            value, position = _DECODER.raw_decode(text, position)
        except (ValueError, RecursionError):
            return None
        values.append(value)
        while position < len(text) and text[position] in " \t\r":
            position += 1
    return values if len(values) > 1 else None


def objects(items: Sequence[object], tally: Tally, what: str = "messages") -> Iterator[tuple[int, dict[str, Any]]]:
    """(position, item) for each item of a JSON list that is an object; the others are
    skipped and counted as ``what`` that are not objects."""
    for number, item in enumerate(items):
        if isinstance(item, dict):
            yield number, item
        else:
            tally.skip(f"{what} that are not objects")


def text_of(value: object) -> str:
    """Text from a string, or from a list of text parts (any of the formats' shapes)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text_of(part) for part in value if isinstance(part, (dict, str)) and text_of(part))
    if isinstance(value, dict):
        for key in ("text", "content", "output"):
            if key in value:
                return text_of(value[key])
    return "" if value is None else json.dumps(value, ensure_ascii=False, default=str)


def append_message(messages: list[Message], message: Message) -> bool:
    """Append ``message``; a ``tool`` message right after another joins it (one turn's
    results in one message). True when ``message`` became a message of its own."""
    if message.role == "tool" and messages and messages[-1].role == "tool":
        messages[-1] = messages[-1].with_content((*messages[-1].content, *message.content))
        return False
    messages.append(message)
    return True


def input_tokens(usage: object, *keys: str) -> int:
    """The input tokens a usage record counts: the sum of ``keys`` (input, cached input,
    ...) that are counts; 0 when ``usage`` is not a record."""
    if not isinstance(usage, dict):
        return 0
    return sum(_count(usage.get(key)) for key in keys)


def tool_call_arguments(raw: object, call_id: object) -> dict[str, Any]:
    """A call's arguments from a JSON string or an object; anything else (a custom
    tool's free-form input, arguments that are not JSON) kept whole as ``{"input": raw}``."""
    try:
        return tool_arguments(raw, str(call_id))
    except HistoryError:
        return {"input": raw}


def chat_tool_calls(calls: object, tally: Tally) -> list[Block]:
    """An OpenAI-chat ``tool_calls`` list as calls; malformed entries skipped and counted."""
    blocks: list[Block] = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            tally.skip("malformed tool calls")
            continue
        block = safe_block(lambda: ToolCall(call["id"], str(function["name"]), tool_call_arguments(function.get("arguments"), call["id"])),
                           tally, "malformed tool calls")
        if block is not None:
            blocks.append(block)
    return blocks


def safe_block(build: Any, tally: Tally, reason: str) -> Block | None:
    """``build()``, or None (counted as ``reason``) when the input is malformed."""
    try:
        block: Block = build()
    except (HistoryError, KeyError, TypeError, ValueError, AttributeError, IndexError):
        tally.skip(reason)
        return None
    return block


def image_or_stub(media_type: object, data: object, tally: Tally) -> Image | Text:
    """An image from base64 data; a text stub (counted) when the data is not base64."""
    import base64
    import binascii

    if isinstance(data, str) and isinstance(media_type, str):
        try:
            return Image(media_type, base64.b64decode(data, validate=True))
        except (binascii.Error, ValueError):
            pass
    tally.repair("images without valid data kept as a text stub")
    return Text(f"[image {media_type}: its data was not valid base64]")


def epoch_seconds(value: object) -> float | None:
    """A harness's timestamp as seconds since the epoch (UTC): an ISO 8601 string
    (``2026-02-10T21:54:15.897Z``; without a zone, UTC), or a number of seconds or of
    milliseconds (a number past the year 5138 in seconds is read as milliseconds).
    None for anything else, so a malformed time never stops an import."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        seconds = float(value) / 1000 if abs(value) >= 1e11 else float(value)
        return seconds if math.isfinite(seconds) and seconds > 0 else None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


@contextmanager
def read_only_sqlite(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to a harness's SQLite database that writes nothing beside it.

    SQLite's ``mode=ro`` still creates ``-shm`` (and ``-wal``) files next to a database
    in WAL mode, in the user's folder, or in a read-only copy a root process can write
    to. A database with a ``-wal`` beside it (the harness's newest writes live there) is
    copied with it to a scratch folder and read there; one without is opened
    ``immutable``, which SQLite reads without any side file. ``HistoryError`` names the
    file when it cannot be opened."""
    wal = path.with_name(path.name + "-wal")
    with tempfile.TemporaryDirectory(prefix="glyphpack-sqlite-") as scratch:
        try:
            if wal.is_file():
                copy = Path(scratch, "copy.db")
                shutil.copyfile(path, copy)
                shutil.copyfile(wal, Path(scratch, "copy.db-wal"))
                connection = sqlite3.connect(copy)
            else:
                connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"{path}: cannot open the database: {exc}") from None
        try:
            yield connection
        finally:
            connection.close()
