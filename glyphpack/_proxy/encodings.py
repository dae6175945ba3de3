"""Request bodies a client compressed (``content-encoding``). Codex signed in with
ChatGPT sends its Responses requests compressed with zstd (its
``enable_request_compression``, on by default since January 2026), and any HTTP client
may gzip a body. The proxy reads them decoded; a body it forwards unchanged goes
upstream as it came, still compressed (``server``)."""

from __future__ import annotations

import zlib

import zstandard

from .identity import BadRequest

#: Bytes a request body may decode to; past it the request is refused (413) before more
#: is decoded: a few compressed kilobytes can stand for gigabytes. No provider takes a
#: request near it (Anthropic's Messages API takes 32 MB).
DECODED_LIMIT = 256 * 1024 * 1024
#: The content codings read here, by the name a client gives them.
CODINGS = ("zstd", "gzip", "x-gzip", "deflate", "identity")
#: Bytes decoded at a time, each step checked against the limit.
_STEP = 1 << 20


def decoded(raw: bytes, encoding: str | None, limit: int | None = None) -> bytes:
    """``raw`` decoded as its ``content-encoding`` header says (codings in the order they
    were applied, so undone last first). ``BadRequest``: 415 for a coding not read here,
    400 for bytes that do not decode, 413 for a body that decodes past ``limit`` bytes
    (default ``DECODED_LIMIT``)."""
    limit = DECODED_LIMIT if limit is None else limit
    codings = [coding.strip().lower() for coding in (encoding or "").split(",") if coding.strip()]
    unknown = [coding for coding in codings if coding not in CODINGS]
    if unknown:
        raise BadRequest(f"the request body's content-encoding {unknown[0]!r} is not one the proxy reads ({', '.join(CODINGS[:-1])})", status=415)
    body = raw
    for coding in reversed(codings):
        if coding == "zstd":
            body = _zstd(body, limit)
        elif coding in ("gzip", "x-gzip"):
            body = _zlib(body, "gzip", 16 + zlib.MAX_WBITS, limit)
        elif coding == "deflate":
            body = _zlib(body, "deflate", zlib.MAX_WBITS, limit)
    return body


def _too_large(limit: int) -> BadRequest:
    return BadRequest(f"the request body decodes to more than {limit:,} bytes, more than the proxy reads", status=413)


def _zstd(data: bytes, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
            while chunk := reader.read(min(_STEP, limit + 1 - size)):
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
    except zstandard.ZstdError as exc:
        raise BadRequest(f"the request body does not decode as zstd ({exc})") from None
    return b"".join(chunks)


def _zlib(data: bytes, coding: str, wbits: int, limit: int) -> bytes:
    """gzip (members one after another, as gzip writes them) or zlib-wrapped deflate,
    never asked for more than the limit leaves (a bomb stops at ``limit + 1`` bytes)."""
    chunks: list[bytes] = []
    size = 0
    rest = data
    try:
        while True:
            decoder = zlib.decompressobj(wbits)
            chunk = decoder.decompress(rest, limit + 1 - size)
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            if not decoder.eof:  # (output left undecoded would have passed the limit above)
                raise BadRequest(f"the request body ends inside its {coding} stream")
            rest = decoder.unused_data
            if not rest or coding != "gzip":
                break
    except zlib.error as exc:
        raise BadRequest(f"the request body does not decode as {coding} ({exc})") from None
    if rest:
        raise BadRequest(f"the request body has bytes after its {coding} stream")
    return b"".join(chunks)
