"""What an import yields, as the workspace stores it: an ``ImportedSession`` (its agents,
branches, title, and the ``ImportReport`` of what was read, skipped and repaired), each
``ImportedAgent`` with its messages, compactions and measured ``Usage``. The importers
(``glyphpack._importers``) fill these; the workspace (``store``) keeps them."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from .._types import public
from .messages import Message

#: The text of a result made up for a call that never got one.
MISSING_RESULT = "[no result: the session ended this turn before the tool returned]"


@public
@dataclasses.dataclass(frozen=True, kw_only=True)
class ImportReport:
    """What an import found and what it had to change, all counted.

    Attributes:
        format: the format read (``claude-code``, ``pi``, ``codex``, ``swe-agent``,
            ``openai-chat``, ``openai-responses``, ``anthropic``, ``gemini``, ``glyphpack``).
        messages, tool_calls, tool_results, images, thinking: counts over every agent's history.
        agents: agent names, the main one first.
        branches: leaves beyond the chosen one (other paths through the session's tree).
        compactions: compaction points the harness recorded.
        skipped: lines or blocks left out, by reason.
        repaired: things changed to make a valid history, by what was done.
        made_unique: tool call ids renamed because the file reused them.
        assumed: what the import assumed where the file's records are ambiguous.
        cost: what the harness recorded its requests cost, in US dollars, over every
            agent that recorded one (None: none did).
    """

    format: str
    messages: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    images: int = 0
    thinking: int = 0
    agents: tuple[str, ...] = ()
    branches: int = 0
    compactions: int = 0
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)
    repaired: dict[str, int] = dataclasses.field(default_factory=dict)
    made_unique: int = 0
    assumed: tuple[str, ...] = ()
    cost: float | None = None

    def lines(self) -> list[str]:
        """The report as a few lines for a terminal."""
        out = [
            f"format {self.format}: {self.messages:,} messages, {self.tool_calls:,} tool calls, "
            f"{self.tool_results:,} tool results, {self.images:,} images, {self.thinking:,} thinking blocks",
            f"agents: {', '.join(self.agents) or '-'}; other branches: {self.branches}; compaction points: {self.compactions}",
        ]
        for title, counts in (("skipped", self.skipped), ("repaired", self.repaired)):
            if counts:
                out.append(f"{title}: " + ", ".join(f"{n:,} {reason}" for reason, n in sorted(counts.items())))
        if self.made_unique:
            out.append(f"made unique: {self.made_unique:,} reused tool call ids")
        out.extend(f"assumed: {what}" for what in self.assumed)
        if self.cost is not None:
            out.append(f"cost the harness recorded: ${self.cost:,.4f}")
        return out


class Usage(NamedTuple):
    """What a harness recorded of one request: it carried ``messages[start:end]`` and
    produced ``messages[end]``, and the provider counted ``tokens`` input tokens, of
    which ``cache_read`` came from its prompt cache and ``cache_written`` went into it
    (Anthropic bills writes apart; other providers cache without a write price: 0)."""

    start: int
    end: int
    tokens: int
    cache_read: int = 0
    cache_written: int = 0


@public
@dataclasses.dataclass(frozen=True)
class ImportedAgent:
    """One agent's history, and the provider's measured input tokens where the file
    recorded them: each ``usage`` record (start, end, tokens) says the request that
    produced ``messages[end]`` carried ``messages[start:end]`` (after a compaction the
    harness sends only what follows it) and was counted as ``tokens`` input tokens,
    cached ones included. The request also carried what the file does not hold: the
    system prompt and tool schemas."""

    name: str
    messages: tuple[Message, ...]
    usage: tuple[Usage, ...] = ()
    #: The harness's own compactions: for each, the id of the first message its later
    #: requests carried (its summary, or the first message kept), oldest first.
    compactions: tuple[str, ...] = ()
    #: The model the harness last called for this agent, as the file names it (None:
    #: the file does not say); the workspace remembers it, so commands need no --model.
    model: str | None = None
    #: The input window the harness ran with, where the file records it (Codex's
    #: ``model_context_window``); the workspace keeps it with the model.
    context_window: int | None = None
    #: What the harness recorded this agent's requests cost, in US dollars (None: it
    #: recorded no cost).
    cost: float | None = None


@public
@dataclasses.dataclass(frozen=True)
class ImportedSession:
    """A session file as neutral histories.

    Attributes:
        title: the conversation's title, when the file has one.
        agents: the main agent first, then subagents.
        branches: other paths through the session's tree (each a full history from its
            root), for the session tree; the main agent's history is the chosen path.
        report: what was found, skipped and repaired.
    """

    title: str
    agents: tuple[ImportedAgent, ...]
    branches: tuple[tuple[Message, ...], ...]
    report: ImportReport

    @property
    def messages(self) -> tuple[Message, ...]:
        """The main agent's history."""
        return self.agents[0].messages if self.agents else ()
