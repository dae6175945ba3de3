"""What the framework adapters share: matching a framework's history with the stored
one, and the recall tool's answer as text and images."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import UsageError
from .._history.messages import Image, Message, Text, validate_history
from .._history.recall import RECALL_TOOL
from .._session.session import Session


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


__all__ = ["RECALL_TOOL", "recall_answer", "same_content", "store_turns", "unsaved_suffix"]
