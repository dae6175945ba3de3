"""Request bodies parsed in proportion to what is new.

A client resends its whole history with every request: at a thousand turns that is
megabytes of JSON, and ``json.loads`` of 11 MB takes about 28 ms, on the request's path.
The bytes of the history's old messages are the same as in the client's last request, so
the parser compares bytes (``memcmp``, about 0.5 ms for those 11 MB) and parses only
what follows the last message the two requests share; the messages before it are the
previous request's parsed objects, reused (which also makes comparing them as parsed
JSON, ``RequestReader``, a matter of identity).

The value is always exactly ``json.loads(raw)``'s, and anything that is not a body with
a history array, or not plain UTF-8, or not valid, goes to ``json.loads`` itself (so a
bad body gets its error).
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import json
import re
import threading

#: The top-level members that hold a history, per API (Messages and Chat Completions,
#: Responses, Gemini): the first one met whose value is an array is parsed item by item.
HISTORY_KEYS = frozenset({"messages", "input", "contents"})
#: Raw bytes kept for comparing the next request, across all clients (their parsed
#: objects are the recorder's too: ``RequestReader`` keeps the same ones); past it, or
#: past ``CLIENTS`` clients, the least recently seen client's bodies are let go (its next
#: request is parsed whole).
MEMORY = 256 << 20
CLIENTS = 256

_WHITESPACE = re.compile(r"[ \t\n\r]*")  # JSON's, as ``json.decoder`` skips it
_ENDS_AN_ITEM = (b",", b"]", b" ", b"\t", b"\n", b"\r")  # what may follow an item in the array
_DECODER = json.JSONDecoder()
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]  # (the C one where built)


@dataclasses.dataclass(frozen=True, eq=False)
class _Parsed:
    """A body parsed by members, its history array item by item. ``ends``: byte offsets
    in ``raw``, ``ends[0]`` just after the array's ``[``, ``ends[n + 1]`` just after item
    ``n``; ``head``: the members before the array, as parsed."""

    raw: bytes
    head: tuple[tuple[str, object], ...]
    key: str
    items: list[object]
    ends: list[int]
    value: dict[str, object]


class BodyParser:
    """``parse`` keeps each client's last few bodies (``per_client``) and parses a new one
    from where it stops sharing bytes with the closest of them. Thread-safe."""

    def __init__(self, per_client: int = 4, memory: int = MEMORY, clients: int = CLIENTS):
        self.per_client = per_client
        self.memory = memory
        self.clients = clients
        self._lock = threading.Lock()
        self._recent: collections.OrderedDict[bytes, list[_Parsed]] = collections.OrderedDict()
        self._kept_bytes = 0

    def parse(self, raw: bytes, owner: bytes = b"") -> object:
        """``json.loads(raw)``, reusing what ``owner``'s recent bodies share with it;
        ``ValueError`` (``json.JSONDecodeError``, ``UnicodeDecodeError``) or
        ``RecursionError`` as ``json.loads`` raises them."""
        with self._lock:
            kept = list(self._recent.get(owner, ()))
        best, shared = None, -1
        for earlier in kept:
            count = _shared_items(earlier, raw)
            if count > shared:
                best, shared = earlier, count
        try:
            parsed = _parse(raw, best, shared)
        except (ValueError, IndexError, RecursionError):
            parsed = None
        if parsed is None:
            return _parsed_whole(raw)  # the same value, or the error json gives
        self._keep(owner, parsed)
        return parsed.value

    def _keep(self, owner: bytes, parsed: _Parsed) -> None:
        with self._lock:
            earlier = self._recent.pop(owner, [])
            # A body this one continues is not needed again; others (a subagent's) are.
            kept = [parsed, *(p for p in earlier if p.items[:1] != parsed.items[:1])][: self.per_client]
            self._recent[owner] = kept
            self._kept_bytes += sum(len(p.raw) for p in kept) - sum(len(p.raw) for p in earlier)
            while self._kept_bytes > self.memory or len(self._recent) > self.clients:
                _, gone = self._recent.popitem(last=False)
                self._kept_bytes -= sum(len(p.raw) for p in gone)


def _parsed_whole(raw: bytes) -> object:
    """``raw`` by ``json.loads``: what the parser falls back to."""
    return json.loads(raw)


def _shared_items(earlier: _Parsed, raw: bytes) -> int:
    """How many of ``earlier``'s history items ``raw`` begins with, byte for byte and
    ended there too; -1 when it does not even share the array's opening. (An item's end
    is only known by what follows it: ``12`` is not shared with ``123``. Resumed after
    12, the parse would meet the 3 and fail, and the body be parsed whole: counting one
    item fewer parses one item more instead.)"""
    common = _common_prefix(earlier.raw, raw, min(len(raw), earlier.ends[-1] + 1))
    shared = bisect.bisect_right(earlier.ends, common) - 1
    if shared > 0 and earlier.ends[shared] == common and raw[common : common + 1] not in _ENDS_AN_ITEM:
        shared -= 1
    return shared


def _common_prefix(a: bytes, b: bytes, limit: int) -> int:
    """The length of the prefix ``a`` and ``b`` share, up to ``limit`` (at most both
    lengths): compared in growing chunks, the differing one halved down to its byte."""
    view = memoryview(a)
    start, step = 0, 1 << 12
    while start < limit:
        end = min(start + step, limit)
        if not b.startswith(view[start:end], start):
            low, high = start, end  # a[:low] == b[:low]; they differ before high
            while high - low > 1:
                middle = (low + high) // 2
                if b.startswith(view[low:middle], low):
                    low = middle
                else:
                    high = middle
            return low
        start, step = end, min(step * 2, 1 << 20)
    return limit


def _skip(text: str, at: int) -> int:
    """The position after the JSON whitespace at ``at``."""
    match = _WHITESPACE.match(text, at)
    return match.end() if match else at


class _Offsets:
    """Byte offsets in the raw body of positions in its text decoded from ``base`` on
    (positions asked for in increasing order)."""

    def __init__(self, text: str, base: int):
        self.text = text
        self.base = base
        self.ascii = text.isascii()
        self._position, self._offset = 0, base

    def of(self, position: int) -> int:
        if self.ascii:
            return self.base + position
        self._offset += len(self.text[self._position : position].encode("utf-8", "surrogatepass"))
        self._position = position
        return self._offset


def _parse(raw: bytes, earlier: _Parsed | None, shared: int) -> _Parsed | None:
    """``raw`` parsed, from just after ``earlier``'s item ``shared - 1`` (its array's
    opening for 0) when given, else whole (``shared`` unread); None where it is not an
    object with a history array (``json.loads`` then reads it). Malformed JSON raises (the same ``json.loads``
    then raises its own error)."""
    if earlier is None and json.detect_encoding(raw) != "utf-8":
        return None
    start = earlier.ends[shared] if earlier is not None else 0
    text = raw[start:].decode("utf-8", "surrogatepass")
    offsets = _Offsets(text, start)
    key: str | None = None
    head: tuple[tuple[str, object], ...] = ()
    items: list[object] = []
    ends: list[int] = []
    members: list[tuple[str, object]] = []
    if earlier is not None:
        key, head = earlier.key, earlier.head
        items, ends = earlier.items[:shared], earlier.ends[: shared + 1]
        at = _array(text, 0, items, ends, offsets)
        members = [*head, (key, items)]
        after_value = True
    else:
        at = _skip(text, 0)
        if text[at] != "{":
            return None
        at = _skip(text, at + 1)
        if text[at] == "}":
            return None
        after_value = False
    while True:
        if after_value:
            at = _skip(text, at)
            if text[at] == "}":
                break
            if text[at] != ",":
                raise ValueError("expected , or }")
            at = _skip(text, at + 1)
        name, at = _name(text, at)
        after_value = True
        if key is None and name in HISTORY_KEYS and text[at] == "[":  # the history: item by item
            key, head = name, tuple(members)
            items, ends = [], [offsets.of(at + 1)]
            at = _array(text, at + 1, items, ends, offsets)
            members.append((name, items))
        else:
            value, at = _DECODER.raw_decode(text, at)
            members.append((name, value))
    if _skip(text, at + 1) != len(text):
        raise ValueError("extra data")
    if key is None:
        return None
    return _Parsed(raw, head, key, items, ends, dict(members))


def _name(text: str, at: int) -> tuple[str, int]:
    """A member's ``"name":`` from ``at``; the name and where its value starts."""
    if text[at] != '"':
        raise ValueError("expected a member's name")
    name, at = _scanstring(text, at + 1, True)
    at = _skip(text, at)
    if text[at] != ":":
        raise ValueError("expected :")
    return name, _skip(text, at + 1)


def _array(text: str, at: int, items: list[object], ends: list[int], offsets: _Offsets) -> int:
    """The history array's items from ``at`` (just after its ``[`` when ``items`` is
    empty, else just after its last item) appended to ``items``, each one's end to
    ``ends``; the position after its ``]``."""
    at = _skip(text, at)
    if not items and text[at] == "]":
        return at + 1
    while True:
        if items:
            if text[at] == "]":
                return at + 1
            if text[at] != ",":
                raise ValueError("expected , or ]")
            at = _skip(text, at + 1)
        item, at = _DECODER.raw_decode(text, at)
        items.append(item)
        ends.append(offsets.of(at))
        at = _skip(text, at)
