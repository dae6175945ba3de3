"""The floor for the proxy benchmarks: the same stack as ``glyphpack proxy`` (uvicorn,
Starlette, httpx) passing each request's bytes on and the answer back, reading and
recording nothing. What it adds is what any proxy on this stack adds; what glyphpack's
adds above it is the reading and the recording.

``python benchmarks/bare_proxy.py UPSTREAM_URL``: prints its URL on stderr, then serves.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from glyphpack._proxy.server import listen

#: Headers that describe one hop (as the proxy's own list has them).
HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding", "upgrade", "te"}


def app(upstream: str) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=120, limits=httpx.Limits(max_connections=None, max_keepalive_connections=256))

    async def messages(request: Request) -> Response:
        headers = [(k, v) for k, v in request.headers.items() if k not in HOP] + [("accept-encoding", "identity")]
        sent = client.build_request("POST", request.url.path, content=await request.body(), headers=headers)
        answer = await client.send(sent, stream=True)

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in answer.aiter_raw():
                    yield chunk
            finally:
                await answer.aclose()

        kept = {k: v for k, v in answer.headers.items() if k not in HOP}
        return StreamingResponse(chunks(), answer.status_code, headers=kept)

    return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])


if __name__ == "__main__":
    sock = listen("127.0.0.1", 0)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app(sys.argv[1]), log_level="warning")).run(sockets=[sock])
