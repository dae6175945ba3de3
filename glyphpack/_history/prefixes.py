"""Work over a whole history done once: a fold's state kept for the histories it ran
over, resumed for a history that extends one of them.

A session's history only grows between requests (a tuple extended by the very message
objects it held), yet each request checks and prices all of it: the checks that every
call has its result, the token sums. Kept here by the history's last message, each
costs only the messages appended since, so request 1,000 of a conversation costs what
request 10 did. A history is recognized by identity (messages are frozen: the same
object is the same message), compared in C.
"""

from __future__ import annotations

import collections
import operator
import threading
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

State = TypeVar("State")

#: Histories kept per fold (the sessions of a busy proxy each have their own).
KEPT = 256
#: Messages the kept histories may hold together (one in two histories counts twice): a
#: history kept holds its messages alive, and an import of many long sessions would
#: otherwise keep the last 256 of them in memory after each was done with.
HELD_MESSAGES = 65_536
#: Shorter histories are folded whole each time (cheaper than keeping them).
SHORTEST_KEPT = 32
#: How many of a history's last messages are tried as the end of one folded before: a
#: request adds a turn or two; a history that grew more is folded from its start.
LOOKBACK = 16


def begins_with(history: Sequence[Any], prefix: Sequence[Any]) -> bool:
    """Whether ``history`` begins with the very message objects of ``prefix``."""
    return len(history) >= len(prefix) and all(map(operator.is_, prefix, history))


class PrefixFolds(Generic[State]):
    """The state a fold reached at the end of each history it ran over (the most recent
    ``KEPT``, holding ``HELD_MESSAGES`` at most; a history's own earlier ends give way to
    it; thread-safe). Holding the histories keeps their messages' ids from being reused by
    other objects."""

    def __init__(self) -> None:
        self._kept: collections.OrderedDict[tuple[int, int], tuple[tuple[Any, ...], State]] = collections.OrderedDict()
        self._held = 0  # messages the kept histories hold, summed
        self._lock = threading.Lock()

    def resume(self, history: Sequence[Any]) -> tuple[int, State | None]:
        """(n, the state after ``history[:n]``) for the longest such prefix folded before
        among the last ``LOOKBACK`` ends; (0, None) when there is none."""
        with self._lock:
            for n in range(len(history), max(0, len(history) - LOOKBACK), -1):
                key = (id(history[n - 1]), n)
                found = self._kept.get(key)
                # (A kept history holds its last message alive: a key found is that very message.)
                if found is not None and begins_with(history, found[0]):
                    self._kept.move_to_end(key)
                    return n, found[1]
        return 0, None

    def keep(self, history: Sequence[Any], state: State) -> None:
        """Remember ``state`` as the fold's at the end of ``history`` (at least
        ``SHORTEST_KEPT`` messages long: a shorter one is not kept)."""
        if len(history) < SHORTEST_KEPT:
            return
        kept = history if isinstance(history, tuple) else tuple(history)
        with self._lock:
            for n in range(len(kept), max(0, len(kept) - LOOKBACK), -1):  # its own earlier ends, and itself
                earlier = self._kept.get((id(kept[n - 1]), n))
                if earlier is not None and begins_with(kept, earlier[0]):
                    del self._kept[(id(kept[n - 1]), n)]
                    self._held -= n
            self._kept[(id(kept[-1]), len(kept))] = (kept, state)
            self._held += len(kept)
            while len(self._kept) > KEPT or self._held > HELD_MESSAGES:
                self._held -= len(self._kept.popitem(last=False)[1][0])
