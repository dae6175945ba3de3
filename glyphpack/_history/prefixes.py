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
import itertools
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
    ``KEPT``, holding ``HELD_MESSAGES`` at most; thread-safe). Holding the histories keeps
    their messages' ids from being reused by other objects.

    A history that grows takes its earlier ends within ``LOOKBACK`` of its new end with
    it, and its earlier self gives way (its messages are held once): a save of the
    history before an answer with tool calls, checked after the history with it,
    resumes there too."""

    def __init__(self) -> None:
        # Each kept history, by (id of its last message, its length): the history and the
        # states at its ends (its own, and earlier ones it took with it).
        self._kept: collections.OrderedDict[tuple[int, int], tuple[tuple[Any, ...], dict[int, State]]] = collections.OrderedDict()
        # Every end of a kept history, by (id of the message it ends at, its length): whose.
        self._ends: dict[tuple[int, int], tuple[int, int]] = {}
        self._held = 0  # messages the kept histories hold, summed
        self._lock = threading.Lock()

    def resume(self, history: Sequence[Any]) -> tuple[int, State | None]:
        """(n, the state after ``history[:n]``) for the longest such prefix folded before
        among the last ``LOOKBACK`` ends; (0, None) when there is none."""
        with self._lock:
            for n in range(len(history), max(0, len(history) - LOOKBACK), -1):
                found = self._found(history, n)
                if found is not None:
                    self._kept.move_to_end(found[0])
                    return n, found[1]
        return 0, None

    def _found(self, history: Sequence[Any], n: int) -> tuple[tuple[int, int], State] | None:
        """The kept history with an end at ``history[:n]`` (the very messages), and the state there."""
        # (A kept history holds its messages alive: an id found is that very message.)
        whose = self._ends.get((id(history[n - 1]), n))
        if whose is None:
            return None
        kept, states = self._kept[whose]
        if not _begins_with_first(history, kept, n):
            return None
        return whose, states[n]

    def keep(self, history: Sequence[Any], state: State) -> None:
        """Remember ``state`` as the fold's at the end of ``history`` (at least
        ``SHORTEST_KEPT`` messages long: a shorter one is not kept)."""
        if len(history) < SHORTEST_KEPT:
            return
        kept = history if isinstance(history, tuple) else tuple(history)
        end = (id(kept[-1]), len(kept))
        with self._lock:
            states = {len(kept): state}
            for n in range(len(kept) - 1, max(0, len(kept) - LOOKBACK), -1):  # its own earlier ends, taken with it
                found = self._found(kept, n)
                if found is None:
                    continue
                states[n] = found[1]
                if found[0] == (id(kept[n - 1]), n):  # its earlier self: gives way
                    self._drop(found[0])
            if end in self._kept:
                self._drop(end)
            self._kept[end] = (kept, states)
            self._ends.update(((id(kept[n - 1]), n), end) for n in states)
            self._held += len(kept)
            while len(self._kept) > KEPT or self._held > HELD_MESSAGES:
                self._drop(next(iter(self._kept)))

    def _drop(self, whose: tuple[int, int]) -> None:
        kept, states = self._kept.pop(whose)
        self._held -= len(kept)
        for n in states:
            if self._ends.get((id(kept[n - 1]), n)) == whose:
                del self._ends[(id(kept[n - 1]), n)]


def _begins_with_first(history: Sequence[Any], other: tuple[Any, ...], count: int) -> bool:
    """Whether ``history`` begins with the very first ``count`` message objects of ``other``.
    A tuple found so is remembered (``_VERIFIED``): each fold of a session checks the same
    history against the same kept one, and only the first pays for it."""
    if len(history) < count:
        return False
    if history is other:
        return True
    pair = (id(history), id(other))
    if type(history) is tuple:  # immutable: what was found stays true while both are alive (the entry holds them)
        with _VERIFIED_LOCK:
            known = _VERIFIED.get(pair)
        if known is not None and known[0] is history and known[1] is other and known[2] >= count:
            return True
    same = all(map(operator.is_, itertools.islice(other, count), history))
    if same and type(history) is tuple:
        with _VERIFIED_LOCK:
            _VERIFIED[pair] = (history, other, count)
            _VERIFIED.move_to_end(pair)
            while len(_VERIFIED) > VERIFIED_KEPT:
                _VERIFIED.popitem(last=False)
    return same


#: (history, kept history, how many of their first messages are the same objects), by
#: their ids: the checks ``_begins_with_first`` found true, the most recent ones.
VERIFIED_KEPT = 64
_VERIFIED: collections.OrderedDict[tuple[int, int], tuple[tuple[Any, ...], tuple[Any, ...], int]] = collections.OrderedDict()
_VERIFIED_LOCK = threading.Lock()
