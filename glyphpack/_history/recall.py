"""Recall: what the compaction ladder put away, brought back from the stored history.

Every stub the ladder leaves names a *ref* (an elided tool result, an elided call's
arguments, a dropped image, a summarized range), and a session offers the model a tool,
``glyphpack_recall``, that answers a ref locally from the stored transcript: the exact
original, paged when long. Refs:

- ``<call id>``: the result of that tool call, its text and images;
- ``<call id>:arguments``: that call's arguments (JSON);
- ``<message id>:image:<n>``: the n-th image (1-based) of that message;
- ``messages:<first id>..<last id>``: the messages of that range, as snapshot text.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence

from .._types import public
from .messages import Image, Message, Text, ToolCall, ToolResult

#: The recall tool's name, as every API's tool definitions take it.
RECALL_TOOL = "glyphpack_recall"
#: Characters of text one recall answer carries (more: ask for the next page).
RECALL_PAGE_CHARS = 16_000
RECALL_DESCRIPTION = (
    "Bring back, exactly, something glyphpack put away to keep the conversation short: an "
    "elided tool result, a tool call's elided arguments, a dropped image or a summarized range "
    "of messages. Give the ref its note names (for example a tool call id). Long text comes in "
    "pages: ask for page 2 and on as the answer says."
)
RECALL_PARAMETERS = {
    "type": "object",
    "properties": {
        "ref": {"type": "string", "description": "the ref a glyphpack note names"},
        "page": {"type": "integer", "minimum": 1, "description": "which page of a long text (default 1)"},
    },
    "required": ["ref"],
}


# The ref forms, written by the ``*_ref`` functions and read by ``recall``.
_ARGUMENTS, _IMAGE, _RANGE, _RANGE_TO = ":arguments", ":image:", "messages:", ".."
#: An image's number in a ref: ASCII digits only (``str.isdigit`` takes "²", which
#: ``int`` refuses), and few enough that ``int`` takes them.
_IMAGE_NUMBER = re.compile(r"[0-9]{1,9}")


def result_ref(call_id: str) -> str:
    return call_id


def arguments_ref(call_id: str) -> str:
    return f"{call_id}{_ARGUMENTS}"


def image_ref(message_id: str, number: int) -> str:
    return f"{message_id}{_IMAGE}{number}"


def range_ref(first_id: str, last_id: str) -> str:
    return f"{_RANGE}{first_id}{_RANGE_TO}{last_id}"


#: The fewest characters of a message id a ref names (more where fewer would not be
#: unique): a range ref is two of them, not two whole ids (about 160 characters).
SHORT_ID = 8


def _unique_start(identifier: str, others: Sequence[str], at_least: int) -> str:
    """The shortest start of ``identifier``, at least ``at_least`` characters, that none
    of ``others`` begins with (the whole identifier where none is shorter)."""
    for length in range(min(at_least, len(identifier)), len(identifier)):
        start = identifier[:length]
        if not any(other.startswith(start) for other in others):
            return start
    return identifier


def short_id(message_id: str, messages: Sequence[Message]) -> str:
    """The shortest start of ``message_id``, at least ``SHORT_ID`` characters, that no
    other message id of ``messages`` begins with; ``recall`` takes it for the whole id."""
    return _unique_start(message_id, [m.id for m in messages if m.id != message_id], SHORT_ID)


def short_range_ref(messages: Sequence[Message], first: int, last: int) -> str:
    """The ref of ``messages[first..last]`` (inclusive), by the short ids of its ends."""
    return range_ref(short_id(messages[first].id, messages), short_id(messages[last].id, messages))


def _find_message(messages: Sequence[Message], given: str) -> int | str:
    """The index of the message ``given`` names (its id, or a start of it no other id
    shares); else why not, as text."""
    for n, message in enumerate(messages):
        if message.id == given:
            return n
    starting = [n for n, m in enumerate(messages) if m.id.startswith(given)] if len(given) >= SHORT_ID else []
    if len(starting) == 1:
        return starting[0]
    return f"{len(starting)} messages have ids starting {given!r}" if starting else f"no message {given!r} in this conversation"


def recall_hint(ref: str) -> str:
    """How a stub names what it stands for: the ref ``glyphpack_recall`` takes (a
    session without the tool still shows it, a harmless label)."""
    return f"ref {json.dumps(ref, ensure_ascii=False)}"


def cut_to_ends(text: str, keep: int, ref: str) -> str:
    """``text``'s first and last ``keep`` characters around a note of how many were cut
    and the ref that brings them back (``text`` itself when it is no longer than both ends)."""
    if len(text) <= 2 * keep:
        return text
    cut = len(text) - 2 * keep
    return f"{text[:keep]}\n[... {cut:,} chars cut by glyphpack; {recall_hint(ref)} ...]\n{text[len(text) - keep :]}"


#: A ``recall_hint`` in a text: the ref as JSON wrote it.
_HINT = re.compile(r'ref ("(?:[^"\\]|\\.)*")')


def hinted_refs(messages: Sequence[Message]) -> list[tuple[str, int]]:
    """Each ref a stub or note in ``messages`` names (its ``recall_hint``: in text, a
    tool result's text, a call's arguments), the first time it is named, with the index
    of the message it is in."""
    found: dict[str, int] = {}

    def strings(value: object) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, Mapping):
            for item in value.values():
                yield from strings(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                yield from strings(item)

    for index, message in enumerate(messages):
        for block in message.content:
            texts = [block.text] if isinstance(block, (Text, ToolResult)) else strings(block.arguments) if isinstance(block, ToolCall) else []
            for text in texts:
                for match in _HINT.finditer(text):
                    ref = json.loads(match.group(1))
                    if isinstance(ref, str):
                        found.setdefault(ref, index)
    return list(found.items())


def renamed_refs(text: str, rename: Mapping[str, str]) -> str:
    """``text`` with the message ids its hints' refs name (an image's message, a
    range's ends) renamed by ``rename`` (old id -> new id; a call's id, which a fork
    keeps, and an id not in ``rename`` stay)."""

    def new(given: str) -> str:
        if given in rename:
            return rename[given]
        # A short id: the same start of the new id (longer where the copies share it).
        full = [old for old in rename if old.startswith(given)] if len(given) >= SHORT_ID else []
        if len(full) != 1:
            return given
        renamed = rename[full[0]]
        return _unique_start(renamed, [other for other in rename.values() if other != renamed], len(given))

    def one(ref: str) -> str:
        if ref.startswith(_RANGE) and _RANGE_TO in ref:
            first, _, last = ref[len(_RANGE) :].partition(_RANGE_TO)
            return range_ref(new(first), new(last))
        head, _, number = ref.rpartition(_IMAGE)
        if head and _IMAGE_NUMBER.fullmatch(number):
            return f"{new(head)}{_IMAGE}{number}"
        return ref

    def hint(match: re.Match[str]) -> str:
        ref = json.loads(match.group(1))
        return recall_hint(one(ref)) if isinstance(ref, str) else match.group(0)

    return _HINT.sub(hint, text)


@public
@dataclasses.dataclass(frozen=True, kw_only=True)
class Recalled:
    """A recall's answer: the blocks of a tool result and whether it is an error."""

    content: tuple[Text | Image, ...]
    is_error: bool = False

    def as_result(self, call_id: str) -> ToolResult:
        return ToolResult(call_id, self.content, is_error=self.is_error)

    def as_text(self) -> str:
        """The answer as a terminal shows it: its text, each image as a line naming it."""
        return "\n".join(b.text if isinstance(b, Text) else f"[image {b.media_type}, {len(b.data or b''):,} bytes]" for b in self.content)


def recall(
    messages: Sequence[Message], ref: object, page: object = 1, *, range_text: Callable[[Sequence[Message]], str] | None = None
) -> Recalled:
    """What ``ref`` stands for in ``messages`` (the stored history, not a compacted
    view), page ``page`` of it when it is long text. An unknown ref, or a page past
    the end, is an error answer the model can read (it is not raised: a model's call
    must always get an answer). ``range_text`` renders a range of messages as text
    (the snapshot text); without it a range ref is refused."""
    if not isinstance(ref, str) or not ref:
        return _error(f"ref must be a non-empty string, not {ref!r}")
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        return _error(f"page must be a whole number from 1, not {page!r}")
    if ref.startswith(_RANGE) and _RANGE_TO in ref:
        first, _, last = ref[len(_RANGE) :].partition(_RANGE_TO)
        start, end = _find_message(messages, first), _find_message(messages, last)
        if isinstance(start, str) or isinstance(end, str) or start > end:
            ambiguous = [why for why in (start, end) if isinstance(why, str) and not why.startswith("no message")]
            return _error(f"no range of messages {first!r}..{last!r} in this conversation" + "".join(f" ({why})" for why in ambiguous))
        if range_text is None:
            return _error("this session cannot render a range of messages as text")
        return _paged(ref, range_text(messages[start : end + 1]), page, ())
    head, _, number = ref.rpartition(_IMAGE)
    if head and _IMAGE_NUMBER.fullmatch(number):
        found = _find_message(messages, head)
        if isinstance(found, str):
            return _error(found)
        images = messages[found].images
        if not 1 <= int(number) <= len(images):
            return _error(f"message {head!r} has {len(images)} image(s), not an image {number}")
        return Recalled(content=(images[int(number) - 1],))
    if ref.endswith(_ARGUMENTS):
        call_id = ref[: -len(_ARGUMENTS)]
        for message in messages:
            for call in message.tool_calls:
                if call.id == call_id:
                    return _paged(ref, json.dumps(call.arguments, ensure_ascii=False, indent=1), page, ())
        return _error(f"no tool call {call_id!r} in this conversation")
    for message in messages:
        for result in message.tool_results:
            if result.call_id == ref:
                if len(result.text) <= RECALL_PAGE_CHARS and page == 1:
                    return Recalled(content=result.content)  # the result's own blocks, as they were
                return _paged(ref, result.text, page, result.images())
    return _error(f"nothing in this conversation has the ref {ref!r}")


def _paged(ref: str, text: str, page: int, images: Sequence[Image]) -> Recalled:
    """``text`` page by page (images with the first page); a header when it has more."""
    pages = max(1, math.ceil(len(text) / RECALL_PAGE_CHARS))
    if page > pages:
        return _error(f"{ref!r} has {pages} page(s), not a page {page}")
    start = (page - 1) * RECALL_PAGE_CHARS
    chunk = text[start : start + RECALL_PAGE_CHARS]
    carried = tuple(images) if page == 1 else ()
    if pages == 1:
        return Recalled(content=(Text(chunk), *carried))
    more = f"; page {page + 1} has the next" if page < pages else ""
    header = f"[glyphpack recall of {ref}: page {page} of {pages}, characters {start + 1:,}-{start + len(chunk):,} of {len(text):,}{more}]"
    return Recalled(content=(Text(header), Text(chunk), *carried))


def _error(reason: str) -> Recalled:
    return Recalled(content=(Text(f"glyphpack recall: {reason}"),), is_error=True)
