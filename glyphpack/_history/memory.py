"""Transcripts in memory, with the folder store's contract: for tests, and for a run
that needs nothing to outlive it."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from .._providers.text_tokens import DEFAULT_ESTIMATOR, TextEstimator
from .._types import public
from .backend import StoredTranscript
from .ids import check_id
from .messages import Message
from .store import Transcript, _compare_and_swap, _kept_checkpoints, _loaded, _state, _validated


@public
class MemoryStore:
    """Transcripts in memory, with the folder store's contract (``Workspace.load`` and
    ``save``): saves at turn boundaries only, a revision compared and swapped under a
    lock, a history that extends the stored one unless ``replace``, checkpoints kept
    while their message is. For tests, and for a run that needs nothing to outlive it."""

    def __init__(self) -> None:
        self._stored: dict[tuple[str, str], StoredTranscript] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._stored)} transcripts)"

    def transcripts(self) -> list[tuple[str, str]]:
        """Every stored (conversation, agent) pair."""
        with self._lock:
            return sorted(self._stored)

    def load(
        self,
        conversation: str,
        agent: str,
        *,
        keep: int | None = None,
        budget: int | None = None,
        estimator: TextEstimator = DEFAULT_ESTIMATOR,
    ) -> Transcript:
        """As ``Workspace.load``."""
        key = (check_id(conversation, "conversation"), check_id(agent, "agent"))
        with self._lock:
            stored = self._stored.get(key)
        return _loaded(stored, conversation, agent, keep, budget, estimator)

    def save(
        self,
        conversation: str,
        agent: str,
        messages: Sequence[Message],
        *,
        revision: int,
        error: str | None = None,
        checkpoints: Mapping[str, str | None] | None = None,
        replace: bool = False,
    ) -> Transcript:
        """As ``Workspace.save``."""
        key = (check_id(conversation, "conversation"), check_id(agent, "agent"))
        messages = _validated(messages)
        with self._lock:
            stored = _compare_and_swap(f"{conversation}/{agent}", self._stored.get(key), revision, messages, replace)
            marks = _kept_checkpoints(stored, messages, checkpoints)
            self._stored[key] = StoredTranscript(revision + 1, messages, marks, error)
        return Transcript(conversation, agent, messages, revision + 1, _state(messages, error), error, dict(marks))
