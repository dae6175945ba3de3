"""Ids: message ids made fresh, conversation and agent ids checked as file-name-safe."""

from __future__ import annotations

import re
import uuid

from .._errors import StoreError

#: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit. ``fullmatch``
#: (not ``$``, which accepts a trailing newline).
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def new_id() -> str:
    """A fresh message id (32 hex digits)."""
    return uuid.uuid4().hex


def check_id(value: object, what: str) -> str:
    """A conversation or agent id, refused unless it is a plain file-name-safe token."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise StoreError(
            f"{what} id {value!r} is not allowed: use 1-128 letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit"
        )
    return value


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name-2``, ``name-3``... when it is taken."""
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{name}-{number}"
    return candidate
