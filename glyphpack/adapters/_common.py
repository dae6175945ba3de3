"""What the framework adapters share: matching a framework's history with the stored
one, and the recall tool's answer as text and images."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .._compaction.recovery import parse_overflow
from .._compaction.summarize import Summarizer
from .._errors import UsageError
from .._history.messages import Image, Message, Text, validate_history
from .._history.recall import RECALL_TOOL
from .._history.store import Workspace
from .._providers.resolve import resolve
from .._session.session import Session, open_session
from .._types import Api

#: The provider API a model family's requests are shaped like (what ``recover`` parses),
#: for frameworks whose chat models speak each provider's own.
NATIVE_API: dict[str, Api] = {"anthropic": "anthropic", "openai": "openai-chat", "google": "gemini"}


class FrameworkSessions:
    """The glyphpack sessions an adapter keeps, one per (conversation, agent) of a
    framework's agents (a LangGraph thread, a Pydantic AI conversation id, an ADK
    session and each agent in it), in one workspace: opened here from a location (and
    closed with ``close``), or the open one given.

    ``agent``: the transcripts' agent where the framework names none; the rest as
    ``glyphpack.open_session``."""

    def __init__(
        self,
        workspace: str | os.PathLike[str] | Workspace,
        *,
        agent: str,
        summarizer: Summarizer | Callable[[str], str] | str | None,
        context_window: int | None,
        threshold: int | None,
        recall: bool,
    ):
        self._owns_workspace = not isinstance(workspace, Workspace)
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.agent = agent
        self._options: dict[str, Any] = {"summarizer": summarizer, "context_window": context_window, "threshold": threshold, "recall": recall}
        self.sessions: dict[tuple[str, str], Session] = {}
        self._lock = threading.Lock()

    def open(self, conversation: str, model: str, agent: str | None = None) -> Session:
        """The session of ``conversation`` and ``agent`` (default: this one's), opened on
        first use from the workspace (so a conversation continued in a new process goes
        on where it stood)."""
        key = (conversation, agent or self.agent)
        with self._lock:
            if key not in self.sessions:
                self.sessions[key] = open_session(self.workspace, *key, model=model, **self._options)
            return self.sessions[key]

    def forget(self, conversation: str) -> None:
        """Close the sessions of ``conversation`` (its agents'), as when it is deleted."""
        with self._lock:
            for key in [key for key in self.sessions if key[0] == conversation]:
                self.sessions.pop(key).close()

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        self.sessions.clear()
        if self._owns_workspace:
            self.workspace.close()


#: The glyphpack run whose tool is executing, as (conversation, agent, the call's id). A
#: framework run that starts inside that tool (an agent used as a tool, a delegation) is a
#: sub-agent of it: its own transcript in the same conversation.
_CALLING: ContextVar[tuple[str, str, str] | None] = ContextVar("glyphpack_calling", default=None)


@contextmanager
def tool_call(conversation: str, agent: str, call_id: str) -> Iterator[None]:
    """While a tool of the run kept as ``conversation``/``agent`` executes call ``call_id``."""
    token = _CALLING.set((conversation, agent, call_id))
    try:
        yield
    finally:
        _CALLING.reset(token)


def calling_run() -> tuple[str, str] | None:
    """The conversation and agent of the run whose tool is executing (``None`` outside one)."""
    calling = _CALLING.get()
    return None if calling is None else calling[:2]


def sub_agent(name: str) -> tuple[str, str] | None:
    """Where a run of the agent ``name`` starting now is kept when it starts inside a tool
    call of a glyphpack run: that run's conversation, as an agent named by ``name`` and the
    call's id (each call a transcript of its own, found again by the same name since the
    call's id is stored with the caller). ``None`` outside a tool call."""
    calling = _CALLING.get()
    if calling is None:
        return None
    conversation, _, call_id = calling
    named = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{name}-{call_id}").strip("-._")
    return conversation, named[:128] or "subagent"


def framework_api(model: str, api: Api | None) -> Api:
    """The API a framework's requests to ``model`` are shaped like: ``api``, else the
    model's provider's own."""
    return api or NATIVE_API[resolve(model).reader.provider]


def recover_or_raise(session: Session, error: Exception) -> None:
    """After a model call failed with ``error``: a "too long" rejection compacts further
    (``Session.recover`` escalates, then raises: a caller that sends again never loops);
    any other error is raised as it came."""
    if parse_overflow(error) is None:
        raise error
    session.recover(error)


def same_content(a: Message, b: Message) -> bool:
    """Whether two messages say the same (role and content; ids and times aside)."""
    return a.role == b.role and a.content == b.content


def unsaved_suffix(session: Session, history: Sequence[Message], framework: str) -> tuple[Message, ...]:
    """The messages of ``history`` (a framework's whole history) that ``session`` has not
    stored yet: on a new transcript all of them, its system prompt included; then those
    after the stored ones (system messages aside: a framework may send its system prompt
    apart). The stored history must begin it: a framework that dropped or edited what it
    sent before is refused with where they part, since storing it would lose what was
    stored."""
    if not session.messages:
        return tuple(history)
    stored = [m for m in session.messages if m.role != "system"]
    given = [m for m in history if m.role != "system"]
    for index, (kept, now) in enumerate(zip(stored, given)):
        if not same_content(kept, now):
            raise UsageError(
                f"{framework}: message {index} of the history ({now.role}) differs from the stored one "
                f"({session.conversation}/{session.agent}); glyphpack keeps what was stored, so start another "
                f"conversation for a history that was edited"
            )
    if len(given) < len(stored):
        raise UsageError(
            f"{framework}: the history holds {len(given)} messages, the stored one {len(stored)} "
            f"({session.conversation}/{session.agent}); glyphpack keeps what was stored"
        )
    return tuple(given[len(stored) :])


def store_turns(session: Session, messages: Sequence[Message]) -> None:
    """Append ``messages`` to ``session`` (saved once: they must end at a turn boundary)."""
    if messages:
        validate_history((*session.messages, *messages), allow_pending=False)
        session.extend(messages)


def recall_answer(session: Session, arguments: Mapping[str, Any]) -> tuple[str, tuple[Image, ...], bool]:
    """``glyphpack_recall``'s answer to ``arguments`` from the stored transcript: its text,
    its images and whether it is an error (an unknown ref is answered, not raised)."""
    recalled = session.recall(arguments.get("ref"), arguments.get("page", 1))  # type: ignore[arg-type]
    text = "\n".join(b.text for b in recalled.content if isinstance(b, Text))
    images = tuple(b for b in recalled.content if isinstance(b, Image))
    return text, images, recalled.is_error


__all__ = [
    "NATIVE_API", "RECALL_TOOL", "FrameworkSessions", "calling_run", "framework_api", "recall_answer", "recover_or_raise", "same_content",
    "store_turns", "sub_agent", "tool_call", "unsaved_suffix",
]
