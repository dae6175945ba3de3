"""Format detection from content, and ``import_file``: one entry per format."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..._errors import HistoryError
from ..._types import public
from . import claude_code, codex, pi, plain, swe_agent
from .base import ImportedSession

#: JSONL formats: name -> (detect from the first records, read).
JSONL_FORMATS: dict[str, tuple[Callable[[list[dict[str, Any]]], bool], Callable[[Path, bytes], ImportedSession]]] = {
    claude_code.FORMAT: (claude_code.detect, claude_code.read),
    pi.FORMAT: (pi.detect, pi.read),
    codex.FORMAT: (codex.detect, codex.read),
}
#: Every format ``import_file`` reads.
FORMATS = (*JSONL_FORMATS, swe_agent.FORMAT, "openai-chat", "openai-responses", "anthropic", "gemini", "glyphpack")
#: Records read to tell JSONL formats apart.
_SNIFF_RECORDS = 50


@public
def import_file(path: str | Path, *, format: str | None = None) -> ImportedSession:
    """A session file as neutral histories, its format detected from its content
    (``format`` forces one of ``FORMATS``). Every history returned is valid for every
    provider; the report counts what was skipped or repaired to make it so. Raises
    ``HistoryError`` naming the file when it is no format glyphpack reads."""
    path = Path(path)
    if format is not None and format not in FORMATS:
        raise HistoryError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise HistoryError(f"cannot read {path}: {exc.strerror}") from None
    document = _whole_json(data)
    one_record = isinstance(document, dict) and any(detect([document]) for detect, _ in JSONL_FORMATS.values())
    if format in JSONL_FORMATS or (format is None and (document is _NOT_JSON or one_record)):
        return _read_jsonl(path, data, format)
    if document is _NOT_JSON:
        raise HistoryError(f"{path} is not JSON, so it cannot be {format}")
    if format == swe_agent.FORMAT or (format is None and swe_agent.detect(document)):
        if not swe_agent.detect(document):
            raise HistoryError(f"{path} is not a SWE-agent trajectory (no history list)")
        return swe_agent.read(path, document)
    kind = format or plain.kind_of(document)
    if kind is None:
        raise HistoryError(
            f"{path}: no session format recognized (read: {', '.join(FORMATS)}); pass --format to say which it is"
        )
    return plain.read(path, document, kind)


class _NotJson:
    pass


_NOT_JSON: Any = _NotJson()


def _whole_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _read_jsonl(path: Path, data: bytes, format: str | None) -> ImportedSession:
    if format is None:
        records = []
        for raw in data.splitlines()[: _SNIFF_RECORDS * 4]:
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(record, dict):
                records.append(record)
            if len(records) >= _SNIFF_RECORDS:
                break
        format = next((name for name, (detect, _) in JSONL_FORMATS.items() if detect(records)), None)
        if format is None:
            raise HistoryError(
                f"{path}: no session format recognized (read: {', '.join(FORMATS)}); pass --format to say which it is"
            )
    return JSONL_FORMATS[format][1](path, data)
