"""The kinds glyphpack names with strings, as ``Literal`` types checked at construction.

Each kind is a ``Literal`` (so mypy checks callers) and a tuple of its values (so a
value read from a file or a caller is checked where it enters: ``check_kind``).
"""

from __future__ import annotations

from typing import Literal, TypeVar, get_args

from ._errors import UsageError
from ._public import public

__all__ = ["public"]

Role = Literal["system", "user", "assistant", "tool"]
#: ``flow`` runs lines together with a newline marker; ``lines`` starts a row per line.
Layout = Literal["flow", "lines"]
#: The provider request formats content blocks are built for.
Api = Literal["anthropic", "openai-chat", "openai-responses", "gemini"]
#: The API family a reader belongs to.
Provider = Literal["anthropic", "openai", "google"]
#: How a route bills images: the reader's own token count, or per request.
RouteBilling = Literal["native", "per-request"]
#: What a provider's "too long" rejection asks for fewer of.
OverflowKind = Literal["tokens", "bytes"]
#: A loaded transcript: nothing stored; the model answered last (the user speaks next);
#: or the model's answer is due (after the user's message or tool results: mid-loop, or a
#: turn to retry after a crash).
LoadState = Literal["empty", "answered", "unanswered"]
#: What pages must keep readable for their reader: every character, the gist, or
#: nothing asked ("dense": the densest shape, 5x8, whatever the reader).
Fidelity = Literal["exact", "gist", "dense"]
#: The compaction ladder's rungs, cheapest first, then the last resort (the newest results cut to their ends).
Rung = Literal["reasoning drop", "elision", "image drop", "snapshot", "summarization", "tail cut"]

ROLES: tuple[Role, ...] = get_args(Role)
LAYOUTS: tuple[Layout, ...] = get_args(Layout)
APIS: tuple[Api, ...] = get_args(Api)
PROVIDERS: tuple[Provider, ...] = get_args(Provider)
ROUTE_BILLINGS: tuple[RouteBilling, ...] = get_args(RouteBilling)
OVERFLOW_KINDS: tuple[OverflowKind, ...] = get_args(OverflowKind)
LOAD_STATES: tuple[LoadState, ...] = get_args(LoadState)
RUNGS: tuple[Rung, ...] = get_args(Rung)
FIDELITIES: tuple[Fidelity, ...] = get_args(Fidelity)

K = TypeVar("K", bound=str)


def check_kind(value: object, allowed: tuple[K, ...], what: str, error: type[Exception] = UsageError) -> K:
    """``value`` if it is one of ``allowed``, else ``error`` naming ``what`` and the choices."""
    if value not in allowed:
        raise error(f"{what} must be one of {', '.join(allowed)}, not {value!r}")
    return value
