"""Tool output as harnesses give it (issue 21): bytes from ``subprocess``, dicts from
JSON tools, lists of strings and blocks, ``None``; nothing dropped, every next request
valid for each API, anything else a ``UsageError`` naming the call."""

from __future__ import annotations

import base64
import hashlib
import io
import json

import pytest
from PIL import Image as PILImage

import glyphpack
from glyphpack import Image, Message, Text, ToolCall, UsageError
from glyphpack._wire.anthropic import check_anthropic
from glyphpack._wire.gemini import check_gemini
from glyphpack._wire.openai_chat import check_openai_chat
from glyphpack._wire.openai_responses import check_openai_responses


def png(format: str = "PNG") -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB" if format == "GIF" else "1", (3, 2)).save(out, format)
    return out.getvalue()


OUTPUTS = {
    "text": ("plain", (Text("plain"),)),
    "bytes": (b"a.py\nb.py\n", (Text("a.py\nb.py\n"),)),
    "mostly-utf8": (b"caf\xc3\xa9 \xff ok", (Text("café \\xff ok\n[1 bytes were not UTF-8: shown as \\xNN]"),)),
    "binary": (b"\x00\x01\xfe", (Text("[binary output: 3 bytes, sha256 " + hashlib.sha256(b"\x00\x01\xfe").hexdigest()[:16]
                                     + "..., as base64]\nAAH+"),)),
    "mostly-not-utf8": (b"\xff\xfe\xfd\xfc ab", (Text("[binary output: 7 bytes, sha256 " + hashlib.sha256(b"\xff\xfe\xfd\xfc ab").hexdigest()[:16]
                                                 + "..., as base64]\n//79/CBhYg=="),)),
    "png": (png(), (Image("image/png", png()),)),
    "gif": (png("GIF"), (Image("image/gif", png("GIF")),)),
    "broken-png": (png()[:-20], None),  # its header reads, its data does not: kept as binary text
    "dict": ({"rows": 2, "ok": True}, (Text('{\n "rows": 2,\n "ok": true\n}'),)),
    "list-of-dicts": ([{"a": 1}], (Text('[\n {\n  "a": 1\n }\n]'),)),
    "mixed": (["first", Text("second"), Image("image/png", png())], (Text("first"), Text("second"), Image("image/png", png()))),
    "tuple": (("x", "y"), (Text("x"), Text("y"))),
    "none": (None, ()),
}


def session_with_calls(tmp_path, names):
    s = glyphpack.open_session(tmp_path / "ws", "task", "coder", model="claude-sonnet-4-5")
    s.add_user("run the tools")
    s.add_response(Message("assistant", tuple(ToolCall(f"call-{n}", "tool", {}) for n in names)))
    return s


def test_every_kind_of_output_is_kept_and_every_next_request_is_valid(tmp_path):
    with session_with_calls(tmp_path, OUTPUTS) as s:
        s.add_tool_results({f"call-{name}": output for name, (output, _) in OUTPUTS.items()})
        stored = {r.call_id: r.content for r in s.workspace.load("task", "coder").messages[-1].tool_results}
        for name, (_, expected) in OUTPUTS.items():
            if expected is not None:
                assert stored[f"call-{name}"] == expected, name
        (broken,) = stored["call-broken-png"]
        assert base64.b64decode(broken.text.split("\n", 1)[1]) == png()[:-20]
        s.add_response(Message("assistant", (Text("done"),)))
        s.add_user("thanks")
        messages = s.messages
    check_anthropic(glyphpack.to_anthropic(messages)[1])
    check_openai_chat(glyphpack.to_openai_chat(messages))
    check_openai_responses(glyphpack.to_openai_responses(messages)[1])
    check_gemini(glyphpack.to_gemini(messages)[1])
    sent = json.dumps(glyphpack.to_openai_chat(messages))
    assert "a.py\\nb.py" in sent and '\\"rows\\": 2' in sent and "second" in sent


@pytest.mark.parametrize("output, message", [
    (5, "call 'call-x' is of type int"),
    (2.5, "call 'call-x' is of type float"),
    (object(), "call 'call-x' is of type object"),
    ({"when": object()}, "call 'call-x' is of type dict but not JSON"),
    (ToolCall("c", "t"), "call 'call-x' is a block of another kind"),
])
def test_anything_else_is_refused_naming_the_call_and_nothing_is_stored(tmp_path, output, message):
    with session_with_calls(tmp_path, ["x"]) as s:
        before = s.workspace.load("task", "coder").messages
        with pytest.raises(UsageError, match=message):
            s.add_tool_results({"call-x": output})
        assert s.workspace.load("task", "coder").messages == before and s.pending_calls


def test_a_sequence_of_results_must_be_results(tmp_path):
    with session_with_calls(tmp_path, ["x"]) as s:
        with pytest.raises(UsageError, match="ToolResult"):
            s.add_tool_results("call-x")  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="ToolResult"):
            s.add_tool_results([{"call-x": "out"}])  # type: ignore[list-item]
