"""Hypothesis strategies and builders for agent histories."""

from hypothesis import strategies as st

from glyphpack import Image, Message, Text, Thinking, ToolCall, ToolResult

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def turn(n: int, calls: int, error: bool = False, image: bool = False) -> list[Message]:
    """One user turn: a question, ``calls`` rounds of tool call + result, an answer."""
    messages = [Message("user", (Text(f"question {n}"),), id=f"u{n}")]
    for k in range(calls):
        call = ToolCall(f"call-{n}-{k}", "read_file", {"path": f"f{n}-{k}.py"})
        messages.append(Message("assistant", (Thinking(f"think {n}.{k}", signature=f"sig-{n}-{k}"), Text(f"reading {k}"), call), id=f"a{n}-{k}"))
        content = (Text(f"contents {n}.{k} " * 3),) + ((Image("image/png", PNG),) if image else ())
        messages.append(Message("tool", (ToolResult(call.id, content, is_error=error and k == 0),), id=f"t{n}-{k}"))
    messages.append(Message("assistant", (Text(f"answer {n}"),), id=f"f{n}"))
    return messages


def history(turns: int, calls_per_turn=2, system: bool = True) -> list[Message]:
    messages = [Message("system", (Text("you are a careful agent"),), id="sys")] if system else []
    for n in range(turns):
        messages += turn(n, calls_per_turn if isinstance(calls_per_turn, int) else calls_per_turn[n])
    return messages


@st.composite
def histories(draw, max_turns: int = 6):
    turns = draw(st.integers(0, max_turns))
    messages = [Message("system", (Text("system prompt"),), id="sys")] if draw(st.booleans()) else []
    for n in range(turns):
        messages += turn(n, draw(st.integers(0, 3)), draw(st.booleans()), draw(st.booleans()))
    return messages
