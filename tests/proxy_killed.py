"""``glyphpack proxy``, SIGKILLed at the ``n``-th time it reaches ``point``: a child
process for ``test_proxy_kill.py``. Run: ``python proxy_killed.py POINT N -- ARGS...``
(ARGS: ``glyphpack proxy``'s). The points, in the order a request meets them:

- ``received``: the body read, nothing done with it (a request the forecast cleared is
  on its way upstream already);
- ``held``: about to go upstream: matched and held by its session, or, cleared by the
  forecast, not read yet;
- ``read``: read, matched and held by its session (cleared: while the upstream answers);
- ``forwarded``: upstream, its answer's headers back;
- ``streaming``: the answer's first event passed on to the client;
- ``answered``: the whole answer read, not yet recorded;
- ``transcript``: the transcript written, the tree not yet;
- ``recorded``: recorded, the stream's last bytes not yet sent.

Nothing here is in glyphpack itself: each point wraps a function from outside."""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import httpx

from glyphpack._cli import main
from glyphpack._history.tree import SessionTree
from glyphpack._proxy.conversations import Recorder
from glyphpack._proxy.server import Proxy
from glyphpack._proxy.streams import AnthropicAccumulator
from glyphpack._session.session import Session

made = 0  # answers read so far (the ``streaming`` point)


def _killed_at(owner: Any, name: str, times: int, after: bool = False) -> None:
    """Replace ``owner.name`` with one that SIGKILLs this process at its ``times``-th
    call, before it runs (or, ``after``, once it returned)."""
    original: Callable[..., Any] = getattr(owner, name)
    calls = 0

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    if hasattr(original, "__code__") and original.__code__.co_flags & 0x80:  # a coroutine function
        @functools.wraps(original)
        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == times and not after:
                die()
            result = await original(*args, **kwargs)
            if calls == times:
                die()
            return result

        setattr(owner, name, wrapped_async)
        return

    @functools.wraps(original)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == times and not after:
            die()
        result = original(*args, **kwargs)
        if calls == times:
            die()
        return result

    setattr(owner, name, wrapped)


POINTS: dict[str, tuple[Any, str, bool]] = {
    "received": (Recorder, "prepare", False),
    "held": (Proxy, "_send_bytes", False),
    "read": (Recorder, "prepare", True),
    "forwarded": (httpx.AsyncClient, "send", True),
    "answered": (Session, "add_response", False),
    "transcript": (SessionTree, "record", False),
    "recorded": (Recorder, "finish", True),
}


if __name__ == "__main__":
    point, times, separator, *proxy_args = sys.argv[1:]
    assert separator == "--"
    if point == "streaming":  # the n-th answer's second chunk read: its first is with the client
        original_init = AnthropicAccumulator.__init__

        def counted_init(self: AnthropicAccumulator) -> None:
            global made
            original_init(self)
            made += 1
            if made == int(times):
                _killed_at(self, "feed", 2)

        AnthropicAccumulator.__init__ = counted_init  # type: ignore[method-assign]
    else:
        owner, name, after = POINTS[point]
        _killed_at(owner, name, int(times), after)
    sys.exit(main(["proxy", *proxy_args]))
