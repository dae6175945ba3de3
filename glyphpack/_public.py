"""``public``: mark a class or function as part of the public API."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def public(obj: T) -> T:
    """Mark a class or function as part of the public API: its repr reads
    ``glyphpack.Name`` (as httpx does), whatever private module defines it.

    Apply it outermost (after ``@dataclass``), so the dataclass machinery has seen the
    real module first.
    """
    obj.__module__ = "glyphpack"
    return obj
