"""Request bodies a client compressed: Codex signed in with ChatGPT sends its Responses
requests with ``content-encoding: zstd`` (``enable_request_compression``, on by default),
and any HTTP client may gzip. The proxy reads them (every limit checked as it decodes),
records them, and forwards a body it leaves unchanged as it came, still compressed; one
it builds goes as its own JSON."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("starlette")
import httpx
import zstandard
from test_proxy_app import Upstream, _app
from test_proxy_clients import OPENING, _answer, _body, _too_long, _words

from glyphpack._proxy.encodings import decoded
from glyphpack._proxy.identity import BadRequest
from glyphpack.testing.fake import FakeModel, FakeUpstream, Turn

Json = dict[str, Any]
KEY = {"x-api-key": "sk-ant-encodings"}


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(data)  # Codex's level


ENCODERS = {"zstd": _zstd, "gzip": gzip.compress, "deflate": zlib.compress}


@given(data=st.binary(max_size=4096), coding=st.sampled_from(sorted(ENCODERS)))
def test_a_body_decodes_to_what_was_compressed(data: bytes, coding: str) -> None:
    assert decoded(ENCODERS[coding](data), coding) == data
    assert decoded(ENCODERS[coding](data), f" {coding.upper()} ") == data  # names are case-insensitive


def test_codings_are_undone_last_first_and_identity_or_none_leaves_the_body_as_it_is() -> None:
    body = b'{"model": "gpt-5", "input": []}'
    assert decoded(_zstd(gzip.compress(body)), "gzip, zstd") == body
    assert decoded(body, None) == decoded(body, "") == decoded(body, "identity") == body


def test_gzip_members_one_after_another_and_zstd_frames_one_after_another_are_one_body() -> None:
    assert decoded(gzip.compress(b"abc") + gzip.compress(b"def"), "gzip") == decoded(gzip.compress(b"abcdef"), "x-gzip") == b"abcdef"
    assert decoded(_zstd(b"abc") + _zstd(b"def"), "zstd") == b"abcdef"


@pytest.mark.parametrize(("raw", "coding", "status", "words"), [
    (b"{}", "br", 415, "'br' is not one the proxy reads (zstd, gzip, x-gzip, deflate)"),
    (b"{}", "zstd, compress", 415, "'compress'"),
    (b"not compressed at all", "zstd", 400, "does not decode as zstd"),
    (b"not compressed at all", "gzip", 400, "does not decode as gzip"),
    (b"not compressed at all", "deflate", 400, "does not decode as deflate"),
    (gzip.compress(b"x" * 1000)[:-12], "gzip", 400, "ends inside its gzip stream"),
    (zlib.compress(b"x" * 1000) + b"tail", "deflate", 400, "bytes after its deflate stream"),
    (gzip.compress(b"x") + b"not a member", "gzip", 400, "does not decode as gzip"),
    (zlib.compress(b"x"), "gzip", 400, "does not decode as gzip"),  # zlib's wrapping is deflate's, not gzip's
], ids=["br", "compress", "not-zstd", "not-gzip", "not-deflate", "cut-gzip", "deflate-then-bytes", "gzip-then-bytes", "zlib-as-gzip"])  # fmt: skip
def test_a_body_that_does_not_decode_is_refused_saying_why(raw: bytes, coding: str, status: int, words: str) -> None:
    with pytest.raises(BadRequest) as refused:
        decoded(raw, coding)
    assert refused.value.status == status and words in str(refused.value)


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_a_body_may_decode_to_the_limit_and_not_a_byte_past_it(coding: str) -> None:
    limit = 3 * (1 << 20) + 5  # past one step of decoding
    assert len(decoded(ENCODERS[coding](b"\0" * limit), coding, limit)) == limit
    with pytest.raises(BadRequest) as refused:
        decoded(ENCODERS[coding](b"\0" * (limit + 1)), coding, limit)
    assert refused.value.status == 413 and "more than 3,145,733 bytes" in str(refused.value)


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_a_bomb_is_never_decoded_past_the_limit(coding: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step asks the decoder for no more than the limit leaves: a few kilobytes
    that stand for 64 MB stop at the limit, whatever the members or frames."""
    from glyphpack._proxy import encodings

    limit, asked = 1 << 20, []
    real_zlib, real_zstd = encodings.zlib.decompressobj, encodings.zstandard.ZstdDecompressor

    class Counted:
        def __init__(self, inner: Any):
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def decompress(self, data: bytes, max_length: int = 0) -> bytes:
            asked.append(max_length)
            return self.inner.decompress(data, max_length)

        def stream_reader(self, *args: Any, **kwargs: Any) -> Any:
            reader = self.inner.stream_reader(*args, **kwargs)
            real_read = reader.read

            class Reader:
                def __enter__(self) -> Reader:
                    return self

                def __exit__(self, *exc: object) -> None:
                    reader.close()

                def read(self, size: int) -> bytes:
                    asked.append(size)
                    return real_read(size)

            return Reader()

    monkeypatch.setattr(encodings.zlib, "decompressobj", lambda wbits: Counted(real_zlib(wbits)))
    monkeypatch.setattr(encodings.zstandard, "ZstdDecompressor", lambda: Counted(real_zstd()))
    bomb = ENCODERS[coding](b"\0" * (64 << 20))
    with pytest.raises(BadRequest) as refused:
        decoded(bomb, coding, limit)
    half = b"\0" * (limit // 2 + 1)  # two gzip members that pass the limit only together
    with pytest.raises(BadRequest, match="more than"):
        decoded(gzip.compress(half) + gzip.compress(half), "gzip", limit)
    assert refused.value.status == 413 and asked and all(0 < size <= limit + 1 for size in asked), asked


def _responses_body(text: str) -> Json:
    return {"model": "gpt-5", "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]}


def test_codex_zstd_request_is_recorded_and_goes_upstream_compressed_as_it_came(tmp_path: Path) -> None:
    """Through the proxy as a user runs it: the upstream (``FakeUpstream``, which reads
    compressed bodies as the provider does) gets the very bytes Codex sent."""
    from glyphpack import Workspace
    from glyphpack._proxy.conversations import ProxySettings, Recorder
    from glyphpack._proxy.server import Proxy, Running

    raw = _zstd(json.dumps(_responses_body("Which service failed first?")).encode())
    with FakeUpstream(FakeModel([Turn(text="auth")])) as upstream, Workspace(tmp_path) as workspace:
        with Running(Proxy(Recorder(workspace, ProxySettings(context_window=200_000)), upstream.url, summarizer=None)) as proxy:
            response = httpx.post(proxy.url + "/v1/responses", content=raw, headers={"authorization": "Bearer sk-codex", "content-type": "application/json", "content-encoding": "zstd"})
        assert response.status_code == 200, response.text
        assert upstream.encodings == [("/v1/responses", "zstd")] and upstream.model.requests == [json.loads(zstandard.ZstdDecompressor().decompress(raw))]
        ((conversation, agent),) = workspace.transcripts()
        assert [m.text for m in workspace.load(conversation, agent).messages] == ["Which service failed first?", "auth"]


def test_a_body_the_proxy_builds_goes_as_its_own_json_without_the_clients_coding(tmp_path: Path) -> None:
    """A "too long" retry is built from the session: its bytes are the proxy's JSON."""
    history: list[Json] = [{"role": "user", "content": OPENING}]
    for n in range(12):
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": f"cat {n}.log"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": _words("alpha", n, 150)}]}]  # fmt: skip

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(decoded(request.content, request.headers.get("content-encoding")))
        return httpx.Response(400, json=_too_long(body)) if len(upstream.requests) == 1 else httpx.Response(200, json=_answer("Found it.", to=body))

    upstream = Upstream(answer)
    client, _, _ = _app(tmp_path, upstream, summarizer=None)
    raw = gzip.compress(json.dumps(_body(history)).encode())
    with client:
        response = client.post("/v1/messages", content=raw, headers={**KEY, "content-type": "application/json", "content-encoding": "gzip"})
    assert response.status_code == 200 and response.json()["content"][0]["text"] == "Found it."
    first, retry = upstream.requests
    assert (first.headers.get("content-encoding"), first.content) == ("gzip", raw)  # as it came
    assert "content-encoding" not in retry.headers and json.loads(retry.content)["messages"]  # the proxy's own JSON


@pytest.mark.parametrize(("coding", "raw", "status"), [("br", b"{}", 415), ("zstd", b"{}", 400), ("zstd", _zstd(b" " * 4096), 413)])
def test_a_body_the_proxy_cannot_decode_is_refused_in_the_apis_shape_and_never_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, coding: str, raw: bytes, status: int) -> None:
    from glyphpack._proxy import encodings

    monkeypatch.setattr(encodings, "DECODED_LIMIT", 4095)
    upstream = Upstream(lambda request: httpx.Response(200, json={}))
    client, proxy, _ = _app(tmp_path, upstream)
    with client:
        for path, kind in (("/v1/responses", "error"), ("/v1/messages", "error"), ("/v1/messages/count_tokens", "error")):
            response = client.post(path, content=raw, headers={**KEY, "content-encoding": coding})
            assert response.status_code == status and kind in response.json(), (path, response.text)
    assert upstream.requests == [] and proxy.recorder.workspace.transcripts() == []


def test_a_compressed_body_to_another_path_goes_upstream_as_it_came(tmp_path: Path) -> None:
    upstream = Upstream(lambda request: httpx.Response(200, json={"ok": True}))
    client, _, _ = _app(tmp_path, upstream)
    raw = _zstd(b'{"purpose": "batch"}')
    with client:
        assert client.post("/v1/files", content=raw, headers={**KEY, "content-encoding": "zstd"}).status_code == 200
    ((sent),) = upstream.requests
    assert (sent.headers.get("content-encoding"), sent.content) == ("zstd", raw)
