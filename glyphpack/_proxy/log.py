"""What the proxy did, request by request, and in total: one line per request on stderr
(``glyphpack proxy`` prints them), optionally one JSON object per line in a file
(``--log-json``), and the totals (what the clients sent, what went upstream, what the
prompt cache read) at exit and on ``GET /glyphpack/status``. No credential, message or
header is ever written: only counts, ids the proxy gave, statuses and times."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from pathlib import Path
from typing import Any, TextIO

from .._types import Api

Json = dict[str, Any]

#: A quoted value in an error's text (Python's repr quotes: single or double).
_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
#: What stands for each quoted value in what the proxy prints or logs.
WITHHELD = "<value withheld>"


def without_values(error: object) -> str:
    """An error's text as the proxy may print or log it: each quoted value (a client's
    text, role, tool name, call id, as glyphpack's errors quote them with ``!r``) replaced
    by ``WITHHELD``, so the field and the type stay and no word a client sent does.
    Cut to one line of at most 300 characters."""
    return _QUOTED.sub(WITHHELD, str(error).replace("\n", " "))[:300]


@dataclasses.dataclass(frozen=True)
class RequestRecord:
    """One client request as the proxy handled it. Token counts: ``client`` and ``sent``
    are glyphpack's estimates of what the client's history and the forwarded request
    carry; ``input``, ``cached`` and ``output`` are what the provider reported (None:
    not said); ``rounds``: upstream requests it took (more than one after a recall)."""

    api: Api
    status: int
    milliseconds: float
    conversation: str | None = None
    agent: str | None = None
    client: int | None = None
    sent: int | None = None
    input: int | None = None
    cached: int | None = None
    output: int | None = None
    compacted: bool = False
    rounds: int = 1
    note: str | None = None

    def line(self) -> str:
        where = f"{self.conversation}/{self.agent}" if self.conversation else "(not recorded)"
        parts = [f"glyphpack proxy: {where} {self.api} -> {self.status} in {self.milliseconds:,.0f} ms"]
        if self.client is not None and self.sent is not None:
            parts.append(f"~{self.client:,} tokens from the client, ~{self.sent:,} sent" + (" (compacted)" if self.compacted else ""))
        if self.input is not None:
            parts.append(f"provider: {self.input:,} in" + (f" ({self.cached:,} cached)" if self.cached else "") + (f", {self.output:,} out" if self.output is not None else ""))
        if self.rounds > 1:
            parts.append(f"{self.rounds - 1} recall round(s) answered")
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)


def provider_usage(api: Api, response: Json | None) -> tuple[int | None, int | None, int | None]:
    """(input, cached, output) tokens a whole response reports; None where it says nothing.
    Anthropic's input is its uncached, cache-written and cache-read tokens together."""
    key = "usageMetadata" if api == "gemini" else "usage"
    usage = response.get(key) if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None, None, None

    def number(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    if api == "gemini":
        return number(usage.get("promptTokenCount")), number(usage.get("cachedContentTokenCount")), number(usage.get("candidatesTokenCount"))

    if api == "anthropic":
        parts = [number(usage.get(k)) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
        total = sum(p for p in parts if p is not None) if parts[0] is not None else None
        return total, parts[2], number(usage.get("output_tokens"))
    if api == "openai-chat":
        details = usage.get("prompt_tokens_details")
        cached = number(details.get("cached_tokens")) if isinstance(details, dict) else None
        return number(usage.get("prompt_tokens")), cached, number(usage.get("completion_tokens"))
    details = usage.get("input_tokens_details")
    cached = number(details.get("cached_tokens")) if isinstance(details, dict) else None
    return number(usage.get("input_tokens")), cached, number(usage.get("output_tokens"))


class ProxyLog:
    """Records requests: a line each to ``stream`` (None: none), a JSON line each to
    ``json_path`` (appended), and running totals. Thread-safe; a write that fails is
    reported once on ``stream`` and the proxy goes on."""

    def __init__(self, stream: TextIO | None = None, json_path: Path | None = None):
        self.stream = stream
        self.json_path = json_path
        self._lock = threading.Lock()
        self._totals: Json = {
            "requests": 0, "failed": 0, "compacted": 0, "recall_rounds": 0,
            "client_tokens": 0, "sent_tokens": 0, "provider_input_tokens": 0, "provider_cached_tokens": 0, "provider_output_tokens": 0,
        }
        self._json_failed = False
        self._by_client: dict[bytes, Json] = {}

    def record(self, entry: RequestRecord, owner: bytes | None = None) -> None:
        """Log ``entry`` and count it in the totals (and in ``owner``'s own, when given:
        a client's ``secret``, kept in memory only)."""
        with self._lock:
            self._count(self._totals, entry)
            if owner is not None:
                self._count(self._by_client.setdefault(owner, self._zeros()), entry)
            self._write(entry)

    def _zeros(self) -> Json:
        return dict.fromkeys(self._totals, 0)

    @staticmethod
    def _count(totals: Json, entry: RequestRecord) -> None:
        totals["requests"] += 1
        totals["failed"] += entry.status >= 400
        totals["compacted"] += entry.compacted
        totals["recall_rounds"] += entry.rounds - 1
        if entry.client is not None and entry.sent is not None:
            totals["client_tokens"] += entry.client
            totals["sent_tokens"] += entry.sent
        for key, value in (("provider_input_tokens", entry.input), ("provider_cached_tokens", entry.cached), ("provider_output_tokens", entry.output)):
            totals[key] += value or 0

    def _write(self, entry: RequestRecord) -> None:
        if self.stream is not None:
            print(entry.line(), file=self.stream, flush=True)
        if self.json_path is not None and not self._json_failed:
            try:
                with self.json_path.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(dataclasses.asdict(entry), ensure_ascii=False) + "\n")
            except OSError as exc:
                self._json_failed = True
                if self.stream is not None:
                    print(f"glyphpack proxy: cannot write the JSON log {self.json_path}: {exc.strerror or type(exc).__name__}; no more JSON lines", file=self.stream, flush=True)

    def totals(self, owner: bytes | None = None) -> Json:
        """The totals so far (``owner``: that client's alone; none yet: zeros), with the
        share of the clients' tokens that was not sent."""
        with self._lock:
            totals = dict(self._totals if owner is None else self._by_client.get(owner) or self._zeros())
        client = totals["client_tokens"]
        totals["saved_share"] = round(1 - totals["sent_tokens"] / client, 4) if client else 0.0
        return totals

    def summary(self) -> str:
        t = self.totals()
        return (
            f"glyphpack proxy: {t['requests']:,} requests ({t['failed']:,} failed, {t['compacted']:,} compacted, "
            f"{t['recall_rounds']:,} recall rounds); clients ~{t['client_tokens']:,} tokens, sent ~{t['sent_tokens']:,} "
            f"({t['saved_share']:.1%} saved); provider: {t['provider_input_tokens']:,} in, {t['provider_cached_tokens']:,} cached, "
            f"{t['provider_output_tokens']:,} out"
        )
