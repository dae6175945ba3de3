"""Request bodies parsed from where they stop sharing bytes with the client's last ones
(``glyphpack._proxy.bodies``): always ``json.loads``'s value, or its error, whatever the
bytes; the shared history items reused as the same objects; each client's bodies its
own; the memory they take bounded; and nothing the proxy does changes the objects it
will reuse."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glyphpack._proxy import bodies
from glyphpack._proxy.bodies import BodyParser, _common_prefix

Json = dict[str, Any]

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(allow_nan=False), st.text(max_size=12),
)  # fmt: skip
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
_formats = st.fixed_dictionaries({"indent": st.none() | st.integers(0, 2), "ensure_ascii": st.booleans(),
                                  "separators": st.sampled_from([None, (",", ":"), (" , ", " : ")])})  # fmt: skip


@contextlib.contextmanager
def _parsed_whole() -> Iterator[list[bytes]]:
    """The bodies the parser hands to ``json.loads`` whole while in the block."""
    whole: list[bytes] = []
    real = bodies._parsed_whole

    def counted(raw: bytes) -> object:
        whole.append(raw)
        return real(raw)

    bodies._parsed_whole = counted
    try:
        yield whole
    finally:
        bodies._parsed_whole = real


def _outcome(parse: Any, raw: bytes) -> tuple[str, str]:
    """What parsing ``raw`` gives, comparable across parsers: the value as JSON text
    (member order included), or the error's type and message."""
    try:
        return "value", json.dumps(parse(raw))
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(["messages", "input", "contents"]), before=st.dictionaries(st.sampled_from(["model", "system", "tools"]), _values, max_size=2),
    items=st.lists(_values, max_size=6), kept=st.integers(0, 6), added=st.lists(_values, max_size=3), after=st.dictionaries(st.text(max_size=4), _values, max_size=2),
    form=_formats, edit=st.none() | st.tuples(st.integers(0, 10**6), st.sampled_from(["insert", "delete", "replace"]), st.binary(min_size=1, max_size=1)),
)  # fmt: skip
def test_a_body_parses_as_json_loads_parses_it_after_any_earlier_one(
    key: str, before: Json, items: list[Any], kept: int, added: list[Any], after: Json, form: Json, edit: tuple[int, str, bytes] | None
) -> None:
    """A body, then the next one as a client sends it (the history kept in part, more
    appended, the same spacing), with one byte inserted, deleted or replaced anywhere or
    not: the parser gives exactly ``json.loads``'s value or its error, member order too."""
    first = json.dumps({**before, key: items, **after}, **form).encode()
    second = json.dumps({**before, key: [*items[:kept], *added], **after}, **form).encode()
    if edit is not None:
        at, how, byte = edit
        at %= len(second) + 1
        second = second[:at] + (byte if how != "delete" else b"") + second[at + (how != "insert") :]
    parser = BodyParser()
    with _parsed_whole() as whole:
        assert _outcome(parser.parse, first) == _outcome(json.loads, first)
        assert _outcome(parser.parse, second) == _outcome(json.loads, second)
    # A well-formed body is parsed by members, never handed to json.loads whole.
    assert first not in whole and (edit is not None or second not in whole)


def test_the_shared_history_items_are_the_earlier_bodys_own_objects() -> None:
    """What makes a long history cheap: the items the two bodies share byte for byte come
    back as the objects parsed before (and the one that changed, a cache mark moved, and
    the new ones are parsed)."""
    parser = BodyParser()
    history = [{"role": "user", "content": f"turn {n} " * 50} for n in range(5)]
    marked = {"role": "user", "content": [{"type": "text", "text": "now", "cache_control": {"type": "ephemeral"}}]}
    first = parser.parse(json.dumps({"model": "m", "messages": [*history, marked], "system": "s"}).encode())
    unmarked = {"role": "user", "content": [{"type": "text", "text": "now"}]}
    second = parser.parse(json.dumps({"model": "m", "messages": [*history, unmarked, {"role": "user", "content": "more"}], "system": "s"}).encode())
    assert isinstance(first, dict) and isinstance(second, dict)
    assert all(a is b for a, b in zip(first["messages"][:5], second["messages"][:5]))
    assert second["messages"][5] == unmarked and second["messages"][5] is not first["messages"][5]
    assert second == {"model": "m", "messages": [*history, unmarked, {"role": "user", "content": "more"}], "system": "s"}


@pytest.mark.parametrize("form", [{"ensure_ascii": False}, {"ensure_ascii": True}, {"indent": 2, "ensure_ascii": False}])
def test_items_after_text_in_other_scripts_are_reused_too(form: Json) -> None:
    """Byte offsets are counted in bytes where the text is not ASCII (é is two, 日 three,
    an emoji four): every item but the last of the body before is reused, the history
    begun empty included, and nothing is parsed whole."""
    parser = BodyParser()
    with _parsed_whole() as whole:
        history: list[Json] = []
        previous: list[Any] = []
        for text in ("é à", "日本語のテキスト", "emoji \U0001f600 ok", "plain", "\ud800 alone"):
            parsed = parser.parse(json.dumps({"model": "m", "messages": history, "system": "ß"}, **form).encode("utf-8", "surrogatepass"))
            assert isinstance(parsed, dict) and parsed["messages"] == history
            assert all(a is b for a, b in zip(parsed["messages"][:-1], previous[:-1]))
            previous = parsed["messages"]
            history = [*history, {"role": "user", "content": text}]
    assert whole == []


def test_a_number_that_goes_on_is_read_whole() -> None:
    """An item's end is only known by what follows it: ``12`` then ``123`` is 123, not the
    12 parsed before, and only that item is parsed again."""
    parser = BodyParser()
    first = parser.parse(b'{"messages":[{"a":1},{"b":2},12]}')
    again = parser.parse(b'{"messages":[{"a":1},{"b":2},123]}')
    assert isinstance(first, dict) and isinstance(again, dict) and again == {"messages": [{"a": 1}, {"b": 2}, 123]}
    assert again["messages"][0] is first["messages"][0] and again["messages"][1] is first["messages"][1]
    with _parsed_whole() as whole:
        parser = BodyParser()
        assert parser.parse(b'{"messages":[12]}') == {"messages": [12]}
        assert parser.parse(b'{"messages":[123]}') == {"messages": [123]}
        assert parser.parse(b'{"messages":[123,4]}') == {"messages": [123, 4]}
        assert parser.parse(b'{"messages":[123,45]}') == {"messages": [123, 45]}
        assert parser.parse(b'{"messages":[123,45 ]}') == {"messages": [123, 45]}
        assert parser.parse(b'{"messages":[123,456]}') == {"messages": [123, 456]}
    assert whole == []  # each one parsed from where it changed, none whole


@pytest.mark.parametrize(
    "raw",
    [
        '{"messages":[{"text":"é"}]}'.encode("utf-16"),  # json.loads reads UTF-16 and UTF-32 bytes
        b'\xef\xbb\xbf{"messages":[1]}',  # a UTF-8 byte-order mark
        b'{"messages":[1],"messages":[2]}',  # the last one counts
        b'{"messages":"a string"}',
        b'{"input":"a string","input":[1]}',
        b"[1, 2]",
        b"{}",
        b' {"messages" : [ ] } ',
        b'{"messages":[1]} x',
        b'{"messages":[1,]}',
        b'{"messages":[1] "model":"m"}',
        b'{"messages":["\xff"]}',  # not UTF-8
        b'{"messages":[NaN, -Infinity]}',
        b'{"mo\x01del":"m","messages":[1]}',  # a control character in a name: json refuses it
        b'{"messages"x[1]}',  # no colon after a name
        b'{"model" "m","messages":[1]}',
    ],
)
def test_bodies_json_reads_its_own_way_are_read_as_json_loads_reads_them(raw: bytes) -> None:
    parser = BodyParser()
    assert _outcome(parser.parse, raw) == _outcome(json.loads, raw)
    assert _outcome(parser.parse, raw) == _outcome(json.loads, raw)  # and again, after it


def test_a_client_never_gets_another_clients_objects() -> None:
    """Bodies are kept per client (``owner``): the same bytes from another client are
    parsed anew, not taken from what the first one sent."""
    parser = BodyParser()
    raw = json.dumps({"model": "m", "messages": [{"role": "user", "content": "secret plans"}, {"role": "user", "content": "x"}]}).encode()
    alpha = parser.parse(raw, b"alpha")
    bravo = parser.parse(raw, b"bravo")
    again = parser.parse(raw, b"alpha")
    assert isinstance(alpha, dict) and isinstance(bravo, dict) and isinstance(again, dict)
    assert bravo["messages"][0] is not alpha["messages"][0] and again["messages"][0] is alpha["messages"][0]


def test_the_bytes_kept_stay_within_the_memory_given() -> None:
    """Past ``memory`` bytes kept, the least recently seen client's bodies go first; up
    to it, none."""
    raw = json.dumps({"messages": ["x" * 1000]}).encode()
    parser = BodyParser(memory=3 * len(raw) + 4)
    for owner in (b"a", b"b", b"c"):
        parser.parse(raw, owner)
    parser.parse(raw, b"a")  # seen again: b is now the oldest
    assert list(parser._recent) == [b"b", b"c", b"a"] and parser._kept_bytes == 3 * len(raw)
    parser.parse(raw, b"d")
    assert list(parser._recent) == [b"c", b"a", b"d"] and parser._kept_bytes == 3 * len(raw)
    parser.parse(raw[:-2] + b',"y"]}', b"c")  # c's body continued (4 bytes more): the earlier one gives way
    assert list(parser._recent) == [b"a", b"d", b"c"] and parser._kept_bytes == 3 * len(raw) + 4
    parser.parse(raw[:-2] + b',"yz"]}', b"c")  # a byte more than the memory holds
    assert list(parser._recent) == [b"d", b"c"] and parser._kept_bytes == 2 * len(raw) + 5


def test_at_most_clients_many_clients_bodies_are_kept() -> None:
    raw = json.dumps({"messages": ["x"]}).encode()
    parser = BodyParser(clients=3)
    for owner in (b"a", b"b", b"c"):
        parser.parse(raw, owner)
    assert list(parser._recent) == [b"a", b"b", b"c"]
    parser.parse(raw, b"d")
    assert list(parser._recent) == [b"b", b"c", b"d"] and parser._kept_bytes == 3 * len(raw)


def test_a_client_keeps_a_few_bodies_the_closest_one_used() -> None:
    """A main agent and its subagents interleave: each one's next body continues its own
    last one, up to ``per_client`` kept."""
    parser = BodyParser(per_client=2)
    main = {"model": "m", "messages": [{"role": "user", "content": "the main task"}]}
    sub = {"model": "m", "messages": [{"role": "user", "content": "a subagent's task"}]}
    first_main = parser.parse(json.dumps(main).encode())
    parser.parse(json.dumps(sub).encode())
    main["messages"].append({"role": "assistant", "content": "on it"})
    next_main = parser.parse(json.dumps(main).encode())
    assert isinstance(first_main, dict) and isinstance(next_main, dict)
    assert next_main["messages"][0] is first_main["messages"][0]
    assert len(parser._recent[b""]) == 2


def test_the_common_prefix_is_found_to_the_byte() -> None:
    a = bytes(range(256)) * 40_000
    for at in (0, 1, 4095, 4096, 4097, 70_000, len(a) - 1):
        b = a[:at] + bytes([(a[at] + 1) % 256]) + a[at + 1 :]
        assert _common_prefix(a, b, len(a)) == at
    assert _common_prefix(a, a, len(a)) == len(a) and _common_prefix(a, a[:10] + b"x", 5) == 5


def test_nothing_the_proxy_does_changes_the_objects_it_reuses(tmp_path: Path) -> None:
    """The parsed items kept for the next request are shared with the recorder: a proxied
    conversation that compacts, offers the recall tool and retries after "too long"
    leaves each kept body equal to its bytes parsed afresh."""
    pytest.importorskip("starlette")
    import httpx
    from starlette.testclient import TestClient
    from test_proxy_clients import OPENING, SETTINGS, _answer, _body, _words

    from glyphpack import Workspace
    from glyphpack._proxy.conversations import Recorder
    from glyphpack._proxy.server import Proxy

    sent: list[Json] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=_answer("noted", to=sent[-1]))

    proxy = Proxy(Recorder(Workspace(tmp_path / "ws"), SETTINGS), "https://provider.example", transport=httpx.MockTransport(answer))
    messages: list[Json] = [{"role": "user", "content": [{"type": "text", "text": OPENING, "cache_control": {"type": "ephemeral"}}]}]
    with TestClient(proxy.app) as client:
        for turn in range(8):
            response = client.post("/v1/messages", content=json.dumps(_body(messages)).encode(), headers={"x-api-key": "sk-ant-bodies"})
            assert response.status_code == 200
            messages += [{"role": "assistant", "content": response.json()["content"]}, {"role": "user", "content": _words("a", turn, 600)}]
    kept = [p for bodies in proxy.bodies._recent.values() for p in bodies]
    assert kept and all(json.loads(p.raw) == p.value for p in kept)
    # A compaction was in force (the view built from these objects), and the recall tool offered.
    assert len(sent[-1]["messages"]) < len(messages) - 2 and sent[-1]["tools"][-1]["name"] == "glyphpack_recall"
