"""Which requests go upstream before the proxy reads them.

Below the threshold the client's own bytes go upstream untouched; only reading the
request (parsing it, matching its history, asking its session) tells that it is below.
That reading takes milliseconds, more as the history grows. The forecast tells it from
the request's size alone, from what the client's last requests showed: the session's
estimate per byte of request, and how far below the point where its session would
build the request itself (``Session.whole_below``). A request the forecast clears is
sent at once, and read while the upstream answers.

It is kept per client and per conversation name (``Client.secret``,
``Client.conversation``: no client's requests ever clear another's), across every
history of theirs this process recorded, the least room of them counting: any of them
may be the one a request continues. A history with a compaction in force clears
nothing for its client. What it cannot know (a compaction another process made, a
request more than twice as dense as the client's last) is caught once the request is
read: it went as the client sent it, and is recorded as such (``server``); the next is
read first.
"""

from __future__ import annotations

import collections
import threading

from .conversations import OPEN_SESSIONS, Exchange
from .histories import Key
from .identity import Client

#: The forecast clears a request only while, as dense (estimated tokens per byte) as the
#: last request of each of the client's histories, it would take at most this share of
#: the tokens below which that history's session builds nothing.
SHARE = 0.5
#: Clients (with their conversation names) remembered, the most recent; a client beyond
#: them is read before it is sent until its next request teaches the forecast again.
CLIENTS_KEPT = 1024
#: Histories remembered per client (as many as the sessions the recorder keeps open); a
#: client with more is forgotten whole, and learned again. At most a quarter of a
#: million limits in all, a few tens of megabytes.
HISTORIES_KEPT = OPEN_SESSIONS


class Forecast:
    """Per client: for each history it holds, the largest request (in bytes) that surely
    goes as it came. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limits: collections.OrderedDict[tuple[bytes, str | None], dict[Key, int]] = collections.OrderedDict()

    def as_sent(self, client: Client, size: int) -> bool:
        """Whether a request of ``size`` bytes from ``client`` goes upstream as it came
        (False for a client not seen yet)."""
        with self._lock:
            limits = self._limits.get((client.secret, client.conversation))
            return limits is not None and size < min(limits.values())

    def learn(self, client: Client, size: int, exchange: Exchange) -> None:
        """What ``exchange`` (``client``'s request of ``size`` bytes, read) shows of the
        history it was recorded in; an exchange not recorded shows nothing."""
        session = exchange.session
        if session is None:
            return
        limit = 0  # a view in force: its ``whole_below`` is 0
        if exchange.client_tokens and exchange.whole_below:
            # The bytes at which a request as dense as this one would reach SHARE of the room.
            limit = int(size * SHARE * exchange.whole_below / exchange.client_tokens)
        owner = (client.secret, client.conversation)
        with self._lock:
            limits = self._limits.pop(owner, {})
            if len(limits) >= HISTORIES_KEPT and (session.conversation, session.agent) not in limits:
                limits = {}
            limits[session.conversation, session.agent] = limit
            self._limits[owner] = limits
            while len(self._limits) > CLIENTS_KEPT:
                self._limits.popitem(last=False)
