"""aider chat histories (``.aider.chat.history.md``): Markdown that aider appends to as
it runs.

- ``# aider chat started at …`` opens a chat;
- ``#### `` lines are what the user typed (a multi-line message is several such lines);
  answers to aider's own questions (``(Y)es/(N)o``) are aider's dialogue, not turns;
- ``> `` lines are what aider showed the user (command output, warnings, edits
  applied); ``> Tokens: 1.8k sent, 653 received.`` records a call's input and output;
- everything else is the model's answer, its reasoning between ``<thinking-content-…>``
  tags.

Every chat joins one history, as aider's ``--restore-chat-history`` reads them back; a
call's measured input counts from the start of its chat. What aider showed the user is
kept with the message it followed, as ``Opaque`` blocks: stored and exported, never
sent to a provider (the model did not see it).
"""

from __future__ import annotations

import re
from pathlib import Path

from .._history.imported import ImportedAgent, ImportedSession, Usage
from .._history.messages import Block, Message, Opaque, Text, Thinking
from .base import Tally, repair, usage_in

FORMAT = "aider"

_CHAT_START = re.compile(r"^# aider chat started at (.*)$")
_QUESTION = re.compile(r"\(Y\)es/\(N\)o")
_TOKENS = re.compile(r"^Tokens: ([\d.]+)([kM]?) sent\b", re.IGNORECASE)
#: Reasoning between aider's tags; an answer cut off (^C) leaves the closing tag out.
_THINKING = re.compile(r"<thinking-content-[0-9a-f]+>(.*?)(?:</thinking-content-[0-9a-f]+>|\Z)", re.DOTALL)


def detect(text: str) -> bool:
    return any(_CHAT_START.match(line) for line in text[:65536].splitlines()[:200])


def read(path: Path, text: str) -> ImportedSession:
    tally = Tally()
    parser = _Parser()
    for line in text.splitlines():
        parser.line(line)
    parser.finish()
    tally.assume("chats are joined into one history, as aider's --restore-chat-history reads them back")
    if parser.usage:
        tally.assume("aider writes each call's input rounded (1.8k sent): that rounding is the measured input")
    repaired = repair(parser.messages, tally)
    agents = (ImportedAgent("main", tuple(repaired), usage_in(repaired, parser.messages, parser.usage)),)
    return ImportedSession("", agents, (), tally.report(FORMAT, agents, 0))


def _sent(line: str) -> int:
    match = _TOKENS.match(line)
    if match is None:
        return 0
    scale = {"": 1, "k": 1_000, "K": 1_000, "m": 1_000_000, "M": 1_000_000}[match.group(2)]
    return round(float(match.group(1)) * scale)


class _Parser:
    """Reads the file line by line into messages: runs of lines of one kind make one
    message (user) or one answer (assistant); aider's output rides on the last message."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.usage: list[Usage] = []
        self.kind: str | None = None  # "user", "assistant" or "output": the run being read
        self.lines: list[str] = []
        self.chat_start = 0  # index of the current chat's first message
        self.chat = 0
        self.waiting: list[Block] = []  # aider's output before the chat's first message

    def line(self, line: str) -> None:
        started = _CHAT_START.match(line)
        if started:
            self.flush()
            self.chat += 1
            self.chat_start = len(self.messages)
            self.waiting.append(Opaque("aider-chat-start", {"chat": self.chat, "started": started.group(1).strip()}))
            return
        if line.startswith("####"):
            typed = _unbreak(line[4:].removeprefix(" "))
            kind = "output" if _QUESTION.search(typed) else "user"
            body = f"[answered] {typed}" if kind == "output" else typed
        elif line.startswith("> ") or line.rstrip() == ">":
            kind, body = "output", _unbreak(line[2:])
        else:
            kind, body = "assistant", line
        if kind != self.kind:
            self.flush()
            self.kind = kind
        self.lines.append(body)

    def flush(self) -> None:
        kind, lines = self.kind, self.lines
        self.kind, self.lines = None, []
        if kind == "user":
            self._add("user", [Text("\n".join(lines))])
        elif kind == "assistant":
            text = "\n".join(lines).strip("\n")
            if text.strip():
                self._add("assistant", _answer(text))
        elif kind == "output":
            for line in lines:
                sent = _sent(line)
                last = len(self.messages) - 1
                if sent and self.messages and self.messages[last].role == "assistant":
                    self.usage.append(Usage(self.chat_start, last, sent))
            output: Block = Opaque("aider-output", {"text": "\n".join(lines)})
            if len(self.messages) > self.chat_start:
                last_message = self.messages[-1]
                self.messages[-1] = last_message.with_content((*last_message.content, output))
            else:
                self.waiting.append(output)

    def finish(self) -> None:
        """The last run read, and output after the last message kept on it."""
        self.flush()
        if self.waiting and self.messages:
            self.messages[-1] = self.messages[-1].with_content((*self.messages[-1].content, *self.waiting))
        elif self.waiting:
            self.messages.append(Message("user", tuple(self.waiting), id="aider-0"))

    def _add(self, role: str, blocks: list[Block]) -> None:
        content = (*self.waiting, *blocks)
        self.waiting = []
        if len(self.messages) > self.chat_start and self.messages[-1].role == role:
            self.messages[-1] = self.messages[-1].with_content((*self.messages[-1].content, *content))
            return
        self.messages.append(Message(role, content, id=f"aider-{len(self.messages)}"))  # type: ignore[arg-type]


def _unbreak(line: str) -> str:
    """A line without the two trailing spaces aider adds (a Markdown line break)."""
    return line[:-2] if line.endswith("  ") else line


def _answer(text: str) -> list[Block]:
    """The model's answer: its reasoning blocks, then what it said."""
    blocks: list[Block] = [Thinking(m.group(1).strip("\n")) for m in _THINKING.finditer(text)]
    said = _THINKING.sub("", text).strip("\n")
    if said.strip():
        blocks.append(Text(said))
    return blocks
