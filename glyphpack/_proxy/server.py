"""``glyphpack proxy``: an HTTP endpoint that speaks the Anthropic Messages, OpenAI Chat
Completions and Responses APIs, records each request's conversation in a workspace,
compacts it as a ``Session`` would, and forwards it to the one upstream named when it
started, with the caller's own key and headers (never stored or logged).

Built on Starlette (routing, streaming responses) under uvicorn, with httpx for the
upstream: the ``proxy`` extra (``pip install '.[proxy]'`` in a checkout). The recorder's work (matching, saving,
compacting) runs in worker threads under a lock per conversation; nothing is held while
a request is upstream, so clients and conversations run side by side.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import http.cookiejar
import json
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from .._compaction.sdk_summary import SUMMARY_OUTPUT_TOKENS
from .._compaction.summarize import Summarizer
from .._errors import UsageError
from .._history.codec import json_bytes
from .._providers.resolve import context_window
from .._secrets import redacted, scrubbed
from .._types import Api
from .bodies import BodyParser
from .conversations import Exchange, Recorder
from .encodings import decoded
from .forecast import Forecast
from .identity import BadRequest, Client
from .log import ProxyLog, RequestRecord, provider_usage
from .rounds import RELAYS, joined, recall_calls
from .streams import ACCUMULATORS, OPENING_LIMIT, Accumulator, Opening
from .summaries import TIMEOUT, UpstreamSummary, error_message

Json = dict[str, Any]

#: Why a WebSocket is refused (426): what the client should use instead.
WEBSOCKET_REFUSAL = "glyphpack proxy: WebSockets are not served here (requests are recorded over HTTP); use HTTP"
#: ``--summarizer same``: summaries by the model the request is for.
SAME_MODEL = "same"
#: Threads recording whole answers already sent (``_RecordedAfter``).
RECORDER_THREADS = 4
#: The path of the proxy's own status: its totals, as JSON.
STATUS_PATH = "/glyphpack/status"
#: Where ``--upstream anthropic`` and ``--upstream openai`` go.
UPSTREAMS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com", "gemini": "https://generativelanguage.googleapis.com"}
#: Gemini's REST methods the proxy records (the model is in the path:
#: ``/v1beta/models/gemini-2.5-flash:streamGenerateContent``).
GEMINI_METHODS = ("generateContent", "streamGenerateContent")
#: Headers that describe one hop, not the request: never passed on.
_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding", "content-encoding", "upgrade", "te"}
#: Bytes of an upstream answer parsed on the event loop; longer ones go to a worker
#: thread (the hop costs more than parsing a short answer).
PARSED_ON_THE_LOOP = 64 * 1024
#: Connections to the upstream are kept open between requests in ``UPSTREAM_POOLS``
#: pools of at most ``UPSTREAM_POOL`` each, the requests of a client's connection always
#: in its pool (a request may go before the proxy knows its conversation): one pool as
#: httpx keeps it (20) had a proxy with more clients at once open a connection, a TLS
#: handshake with a provider, for every request past the twentieth; and
#: one large pool costs each request work in the square of its size (httpcore 1.0; 128
#: connections kept open: about 9 ms a request here).
UPSTREAM_POOLS = 16
UPSTREAM_POOL = 32
#: Seconds between a served proxy's ticks (uvicorn's: the date header renewed, the exit
#: looked for); ``Running.stop`` wakes it at once.
TICK = 0.1


def upstream_url(name: str) -> str:
    """The base URL for ``--upstream`` (``anthropic``, ``openai`` or an http(s) URL)."""
    url = UPSTREAMS.get(name, name)
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--upstream must be anthropic, openai, gemini or an http(s) URL, not {redacted(name)!r}")
    return url.rstrip("/")


#: The error types Anthropic's and OpenAI's clients read for the statuses the proxy sends
#: itself (anything else: the API's server-side type).
_ERROR_KINDS = {400: "invalid_request_error", 403: "permission_error"}


def error_body(api: Api, status: int, message: str) -> Json:
    """An error in the shape the API's clients parse."""
    if api == "gemini":  # Google's: a code, a message, a status name
        names = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 502: "UNAVAILABLE"}
        return {"error": {"code": status, "message": message, "status": names.get(status, "INTERNAL")}}
    if api == "anthropic":
        return {"type": "error", "error": {"type": _ERROR_KINDS.get(status, "api_error"), "message": message}}
    kind = _ERROR_KINDS.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class Proxy:
    """The ASGI application (``app``) and the upstream client it forwards with."""

    def __init__(
        self, recorder: Recorder, upstream: str, *, summarizer: str | None = SAME_MODEL, transport: httpx.AsyncBaseTransport | None = None,
        log: ProxyLog | None = None,
    ):
        """``summarizer``: the model that summarizes, through the upstream with the
        caller's key (``SAME_MODEL``: the request's own; None: no summarization rung).
        ``log``: where each request and the totals go (None: nowhere; the status
        endpoint then reports no requests)."""
        self.recorder = recorder
        self.log = log if log is not None else ProxyLog()
        self.upstream = upstream_url(upstream)
        self.summarizer = summarizer
        self._transport = transport
        self.bodies = BodyParser()  # each client's bodies parsed from where they differ from its last ones
        self.forecast = Forecast()  # which requests go upstream before they are read
        # The proxy's own side requests (summaries) are made from worker threads, synchronously:
        # a transport given for tests serves them too when it can (httpx.MockTransport does).
        self._side_transport = transport if isinstance(transport, httpx.BaseTransport) else None
        # One TLS context for every connection to the upstream: each pool and each summary
        # request building its own parsed the CA bundle each time (about 40 ms; sixteen
        # pools made the proxy's start 0.7 s).
        self._tls: ssl.SSLContext | None = None
        self._clients: list[httpx.AsyncClient] = []  # the upstream's connection pools (``UPSTREAM_POOLS``)
        self._recorder_threads: concurrent.futures.ThreadPoolExecutor | None = None
        routes = [
            Route("/v1/messages", self._endpoint("anthropic"), methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            *(Route(path, self._endpoint("openai-chat"), methods=["POST"]) for path in ("/v1/chat/completions", "/chat/completions")),
            *(Route(path, self._endpoint("openai-responses"), methods=["POST"]) for path in ("/v1/responses", "/responses")),
            Route("/{version:str}/models/{target:str}", self._gemini, methods=["POST"]),
            Route(STATUS_PATH, self._status, methods=["GET"]),
            Route("/{path:path}", self._pass, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
            WebSocketRoute("/{path:path}", _no_websocket),
        ]
        self.app = Starlette(routes=routes, lifespan=self._lifespan)
        self.app.add_middleware(_NoDotSegments)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        # Answers recorded after the client has them run on threads of their own, not
        # among the worker threads: requests waiting there for such a record cannot hold it up.
        self._recorder_threads = concurrent.futures.ThreadPoolExecutor(RECORDER_THREADS, thread_name_prefix="glyphpack-record")
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=UPSTREAM_POOL)
        pools = UPSTREAM_POOLS if self._transport is None else 1  # a transport given (tests) is its own pool
        self._tls = httpx.create_ssl_context()  # as httpx makes it: SSL_CERT_FILE and SSL_CERT_DIR honoured
        async with contextlib.AsyncExitStack() as stack:
            self._clients = [
                await stack.enter_async_context(
                    httpx.AsyncClient(timeout=TIMEOUT, transport=self._transport, limits=limits, cookies=_NoCookies(), verify=self._tls),
                )
                for _ in range(pools)
            ]
            yield
        self._clients = []
        self._recorder_threads.shutdown()
        self._recorder_threads = None
        self.recorder.close()

    # ------------------------------------------------------------------ upstream

    def client(self, key: object = None) -> httpx.AsyncClient:
        """The upstream connection pool for requests of ``key`` (a client's connection,
        ``request.client``): the same pool for the same key."""
        if not self._clients:
            raise RuntimeError("the proxy's upstream client is open only while the app runs")
        return self._clients[hash(key) % len(self._clients)]

    def _upstream_request(self, request: Request, content: bytes, *, as_sent: bool = False) -> httpx.Request:
        """The request upstream with ``content``; ``as_sent``: the client's own bytes,
        compressed as its ``content-encoding`` says (else the JSON the proxy wrote)."""
        # What is addressed to the proxy (a client key, a conversation's name) stays here.
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP and not k.lower().startswith("x-glyphpack-")]
        if as_sent:
            headers += [("content-encoding", coding) for coding in request.headers.getlist("content-encoding")]
        headers.append(("accept-encoding", "identity"))
        url = self.upstream + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return self.client().build_request(request.method, url, headers=headers, content=content)

    def _goes_as_sent(self, request: Request, api: Api, raw: bytes, client: Client) -> bool:
        """Whether ``raw`` goes upstream before it is read (``Forecast``): never a
        compressed body (its size says little of what it holds) nor a Responses request
        that continues a stored response (its size says nothing of the history). The
        body is searched (on the event loop) only once the forecast would clear it."""
        if "content-encoding" in request.headers or not self.forecast.as_sent(client, len(raw)):
            return False
        return not (api == "openai-responses" and b'"previous_response_id"' in raw)

    def _failed(self, exc: Exception) -> str:
        """Why the upstream failed, as a client may read it: the upstream's URL and the
        error's text without any credential the URL holds."""
        return f"glyphpack proxy: the upstream {redacted(self.upstream)} failed: {scrubbed(str(exc) or type(exc).__name__, self.upstream)}"

    async def _send(self, request: Request, exchange: Exchange, raw: bytes) -> httpx.Response:
        forwarded = exchange.forwarded
        if exchange.api == "gemini":  # the model goes in the path, never in the body
            forwarded = {k: v for k, v in forwarded.items() if k != "model"}
        as_sent = exchange.forwarded is exchange.body
        return await self._send_bytes(request, raw if as_sent else json_bytes(forwarded), as_sent)

    async def _send_bytes(self, request: Request, content: bytes, as_sent: bool) -> httpx.Response:
        """``content`` upstream for ``request`` (``_upstream_request``), on its client
        connection's pool; the answer's headers read, its body not yet."""
        return await self.client(request.client).send(self._upstream_request(request, content, as_sent=as_sent), stream=True)

    # ------------------------------------------------------------------ endpoints

    async def _gemini(self, request: Request) -> Response:
        """``/v1beta/models/MODEL:METHOD``: generateContent and streamGenerateContent are
        recorded (the model is the path's); any other method (countTokens, ...) passes."""
        model, _, method = request.path_params["target"].partition(":")
        if method not in GEMINI_METHODS or not model:
            return await self._pass(request)
        return await self._proxied(request, "gemini", model)

    def _endpoint(self, api: Api) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            return await self._proxied(request, api)

        return endpoint

    def _logged(self, owner: bytes, exchange: Exchange, status: int, started: float, results: Sequence[Json], note: str | None = None) -> None:
        """One request in the log, counted toward its client's (``owner``: ``Client.secret``)
        totals too: its exchange, the upstream's status and whole answers."""
        usage = [provider_usage(exchange.api, r) for r in results]

        def total(part: int) -> int | None:
            counts = [count for u in usage if (count := u[part]) is not None]
            return sum(counts) if counts else None

        session = exchange.session
        self.log.record(RequestRecord(
            exchange.api, status, (time.perf_counter() - started) * 1000,
            conversation=session.conversation if session is not None else None, agent=session.agent if session is not None else None,
            client=exchange.client_tokens, sent=exchange.sent_tokens, input=total(0), cached=total(1), output=total(2),
            compacted=exchange.forwarded is not exchange.body, rounds=max(1, len(results)), note=note or exchange.note,
        ), owner)  # fmt: skip

    def _client_of(self, request: Request) -> Client:
        """Who sent ``request``: its credentials and the deployment's identity headers."""
        settings = self.recorder.settings
        return Client.of(request.headers, request.query_params, identity=settings.identity_headers, keys=settings.client_keys)

    async def _status(self, request: Request) -> Response:
        """The caller's own totals so far (``ProxyLog.totals``), as JSON: never another client's."""
        try:
            client = self._client_of(request)
        except BadRequest as exc:
            return _refused(exc)
        return JSONResponse(self.log.totals(client.secret))

    async def _proxied(self, request: Request, api: Api, model: str | None = None) -> Response:
        """``model``: the model a Gemini request names in its path (its body has none)."""
        started = time.perf_counter()
        raw = await request.body()

        def prepared() -> Exchange:
            # On a worker thread, the parse included: a long history's JSON takes
            # milliseconds, which on the event loop every other client would wait out.
            body = _parsed(raw, request.headers.get("content-encoding"), self.bodies, client.secret)
            if model is not None and isinstance(body, dict):
                body = {**body, "model": model}
            exchange = self.recorder.prepare(api, body, self._summarizer(api, body, request), client)
            self.forecast.learn(client, len(raw), exchange)
            return exchange

        early: asyncio.Task[httpx.Response] | None = None  # the client's bytes, sent before they are read
        try:
            client = self._client_of(request)
            if self._goes_as_sent(request, api, raw, client):
                early = asyncio.ensure_future(self._send_bytes(request, raw, as_sent=True))
            exchange = await run_in_threadpool(prepared)
        except BaseException as exc:
            if early is not None:
                _closed_when_done(early)  # refused once read: nothing of the upstream's answer is used
            if not isinstance(exc, BadRequest):
                raise
            self.log.record(RequestRecord(api, exc.status, (time.perf_counter() - started) * 1000, note="refused by the proxy"))
            return JSONResponse(error_body(api, exc.status, f"glyphpack proxy: {exc}"), status_code=exc.status)
        if early is not None and exchange.forwarded is not exchange.body:
            # The forecast cleared a request its session built (a compaction another
            # process made, a request far denser than its client's last): it went as the
            # client sent it, and is recorded as that.
            print("glyphpack proxy: a request went upstream as it came, before its session built it (the next is read first)", file=sys.stderr)
            exchange.forwarded, exchange.recall, exchange.sent_tokens = exchange.body, False, exchange.client_tokens
        opened: Opened | None = None  # a stream's first events, read to see if it reports a refusal
        # The request's history is saved when no answer saved it (a refusal, a failed
        # upstream, an answer not recorded), before the client reads the response: its
        # retry may reach another worker process, which finds it in the workspace. A
        # stream saves at its end instead (``_streamed``, ``_relayed``), a whole answer
        # sent first after it (``_RecordedAfter``).
        recorded_later = False
        try:
            try:
                upstream = await early if early is not None else await self._send(request, exchange, raw)
                if upstream.status_code in (400, 413) and exchange.session is not None:
                    content, data = await self._read(upstream)
                    retry = await run_in_threadpool(self.recorder.recover, exchange, upstream.status_code, data) if data else None
                    if retry is None:  # the provider's answer, as it sent it
                        self._logged(client.secret, exchange, upstream.status_code, started, [])
                        return _with_headers_of(upstream, Response(content, upstream.status_code))
                    exchange = retry
                    upstream = await self._send(request, exchange, raw)
                elif upstream.status_code == 200 and exchange.session is not None and _streams(upstream):
                    # "Too long" may come inside a 200 stream (Responses' response.failed): the
                    # first events are held until they show it or an answer, and a refusal is
                    # recovered as one by status is.
                    opened = await Opened.read(api, upstream)
                    failure = opened.failure
                    retry = await run_in_threadpool(self.recorder.recover, exchange, 400, failure) if failure else None
                    if retry is not None:
                        await upstream.aclose()
                        exchange, opened = retry, None
                        upstream = await self._send(request, exchange, raw)
            except httpx.HTTPError as exc:
                self._logged(client.secret, exchange, 502, started, [], note=f"the upstream failed: {type(exc).__name__}")
                return JSONResponse(error_body(api, 502, self._failed(exc)), status_code=502)
            if upstream.status_code != 200 or exchange.session is None:
                return self._streamed(upstream, logged=lambda results: self._logged(client.secret, exchange, upstream.status_code, started, results))
            if _streams(upstream):
                recorded_later = True
                if exchange.recall:
                    return self._relayed(request, raw, upstream, exchange, started, opened, client.secret)
                recording = (ACCUMULATORS[api](), exchange)
                return self._streamed(upstream, recording, lambda results: self._logged(client.secret, exchange, 200, started, results), opened)
            answered = await self._answered(request, raw, upstream, exchange, started, client.secret)
            recorded_later = isinstance(answered, _RecordedAfter)
            return answered
        finally:
            if not recorded_later:
                await self._flush(exchange)

    async def _answered(self, request: Request, raw: bytes, upstream: httpx.Response, exchange: Exchange, started: float, owner: bytes) -> Response:
        """A whole (not streamed) answer, recorded, and the rounds that answer recalls."""
        api = exchange.api
        content, data = await self._read(upstream)
        if data is not None and self.recorder.answer_due(exchange, data):
            # The client gets the answer first; it is recorded after (``answer_due``).
            self._logged(owner, exchange, upstream.status_code, started, [data])
            return _with_headers_of(upstream, _RecordedAfter(content, upstream.status_code, self._recording(exchange, data)))
        rounds = [] if data is None else [data]
        while data is not None:
            following = await run_in_threadpool(self.recorder.finish, exchange, data)
            if following is None:
                break
            try:
                upstream = await self._send(request, following, raw)
            except httpx.HTTPError as exc:
                self._logged(owner, following, 502, started, rounds, note=f"the upstream failed after a recall: {type(exc).__name__}")
                return JSONResponse(error_body(api, 502, self._failed(exc)), status_code=502)
            content, data = await self._read(upstream)
            if upstream.status_code != 200 or data is None:  # the provider's answer, as it sent it
                self._logged(owner, following, upstream.status_code, started, rounds)
                return _with_headers_of(upstream, Response(content, upstream.status_code))
            exchange = following
            rounds.append(data)
        # A recall answered (a round after the first), or one beside the client's calls:
        # the answer is the rounds joined; each round but the last called the recall.
        if exchange.recall and rounds and recall_calls(api, rounds[0]):
            content = json_bytes(joined(api, rounds))
        self._logged(owner, exchange, upstream.status_code, started, rounds)
        return _with_headers_of(upstream, Response(content, upstream.status_code))

    def _recording(self, exchange: Exchange, answer: Json) -> Callable[[], Awaitable[None]]:
        async def record() -> None:
            await asyncio.get_running_loop().run_in_executor(self._recorder_threads, self.recorder.finish, exchange, answer)

        return record

    async def _flush(self, exchange: Exchange) -> None:
        """The request's history saved, when no answer saved it (``Recorder.flush``)."""
        if exchange.session is not None and exchange.session.unsaved:
            await run_in_threadpool(self.recorder.flush, exchange)

    def _flush_soon(self, exchange: Exchange) -> None:
        """``_flush`` from where nothing may be awaited (a stream's end, which a client
        that went away cancels): on a worker thread, not waited for."""
        if exchange.session is not None and exchange.session.unsaved:
            asyncio.get_running_loop().run_in_executor(None, self.recorder.flush, exchange)

    def _summarizer(self, api: Api, body: object, request: Request) -> Summarizer | None:
        model = body.get("model") if isinstance(body, dict) else None
        if self.summarizer is None or not isinstance(model, str):
            return None
        chosen = model if self.summarizer == SAME_MODEL else self.summarizer
        window = context_window(chosen)
        known = self.recorder.settings.context_window
        if known is not None:  # the upstream's window, as the proxy was told it: no summary request is larger
            window = min(window, known)
        fn = UpstreamSummary(
            self.upstream, api, chosen, request.headers, body if isinstance(body, dict) else None, request.url.path, request.query_params,
            self._side_transport, self._tls,
        )
        # The request's own model continues the conversation it is in (a prompt-cache
        # read); another model gets the text.
        continues = fn.continued if chosen == model and api != "gemini" else None
        return Summarizer(fn, window=window, output_reserve=SUMMARY_OUTPUT_TOKENS, continues=continues)

    @staticmethod
    async def _read(response: httpx.Response) -> tuple[bytes, Json | None]:
        """A whole upstream response's bytes, and its JSON object if it is one."""
        content = await response.aread()
        await response.aclose()
        try:
            # A long answer parsed on a worker thread: on the event loop every other client would wait it out.
            data = json.loads(content) if len(content) < PARSED_ON_THE_LOOP else await run_in_threadpool(json.loads, content)
        except (ValueError, RecursionError):  # not JSON, or nested past what Python parses
            return content, None
        return content, data if isinstance(data, dict) else None

    def _streamed(
        self, upstream: httpx.Response, recording: tuple[Accumulator, Exchange] | None = None,
        logged: Callable[[list[Json]], None] | None = None, opened: Opened | None = None,
    ) -> StreamingResponse:
        """The upstream's bytes as they come; with ``recording`` (an accumulator and an
        exchange), the exchange's answer recorded as soon as the stream holds all of it,
        before its last bytes reach the client (whose next request then finds it stored).
        ``logged`` is called at the end with the whole answer, if one was read."""
        recorder = self.recorder

        async def chunks() -> AsyncIterator[bytes]:
            reading = recording
            results: list[Json] = []
            try:
                async for chunk in (opened or Opened.unread(upstream)).chunks():
                    if reading is not None:
                        accumulator, exchange = reading
                        try:
                            accumulator.feed(chunk)
                            result = accumulator.result()
                        except Exception as exc:  # an event shaped oddly must never cut the client's stream
                            print(f"glyphpack proxy: answer not recorded: a stream event could not be read ({type(exc).__name__})", file=sys.stderr)
                            reading, result = None, None
                        if result is not None:
                            reading = None
                            results.append(result)
                            await run_in_threadpool(recorder.finish, exchange, result)
                    yield chunk
            finally:
                await upstream.aclose()
                if recording is not None:
                    self._flush_soon(recording[1])
                if logged is not None:
                    logged(results)

        return _with_headers_of(upstream, StreamingResponse(chunks(), upstream.status_code))

    def _relayed(
        self, request: Request, raw: bytes, upstream: httpx.Response, exchange: Exchange, started: float, opened: Opened | None = None,
        owner: bytes = b"",
    ) -> StreamingResponse:
        """A stream whose request offered ``glyphpack_recall``: each round's events go to
        the client as they come (recall calls left out, ``rounds.Relay``); when a round
        calls only the recall, the proxy answers it and streams the next round on, as
        one answer. A round that fails ends the client's stream with the API's error
        event."""
        api = exchange.api
        recorder = self.recorder

        async def chunks() -> AsyncIterator[bytes]:
            relay = RELAYS[api]()
            current, response = exchange, upstream
            first = opened or Opened.unread(upstream)
            results: list[Json] = []
            status, note = 200, None
            try:
                while True:
                    accumulator = ACCUMULATORS[api]()
                    try:
                        async for chunk in (first if response is upstream else Opened.unread(response)).chunks():
                            accumulator.feed(chunk)
                            out = relay.feed(chunk)
                            if out:
                                yield out
                    finally:
                        await response.aclose()
                    result = accumulator.result()
                    if result is not None:
                        results.append(result)
                    following = await run_in_threadpool(recorder.finish, current, result) if result is not None else None
                    if following is None:
                        yield relay.end_round(final=True)
                        return
                    yield relay.end_round(final=False)
                    try:
                        response = await self._send(request, following, raw)
                    except httpx.HTTPError as exc:
                        status, note = 502, f"the upstream failed after a recall: {type(exc).__name__}"
                        yield error_event(api, self._failed(exc))
                        return
                    if response.status_code != 200:
                        status = response.status_code
                        content, data = await self._read(response)
                        message = error_message(data) or content.decode("utf-8", "replace")
                        yield error_event(api, f"glyphpack proxy: the upstream refused the request after a recall ({response.status_code}): {message}")
                        return
                    current = following
            finally:
                self._flush_soon(current)
                self._logged(owner, current, status, started, results, note)

        return _with_headers_of(upstream, StreamingResponse(chunks(), upstream.status_code))

    async def _count_tokens(self, request: Request) -> Response:
        raw = await request.body()
        try:
            client = self._client_of(request)
            encoding = request.headers.get("content-encoding")
            # On a worker thread: decoding and parsing may take milliseconds.
            body = await run_in_threadpool(lambda: self.recorder.counted_body("anthropic", _parsed(raw, encoding), client))
        except BadRequest as exc:
            return JSONResponse(error_body("anthropic", exc.status, f"glyphpack proxy: {exc}"), status_code=exc.status)
        try:
            upstream = await self.client(request.client).send(self._upstream_request(request, json_bytes(body)), stream=True)
        except httpx.HTTPError as exc:
            return JSONResponse(error_body("anthropic", 502, self._failed(exc)), status_code=502)
        return self._streamed(upstream)

    async def _pass(self, request: Request) -> Response:
        """Any other path, to the same upstream as it came (from a client the proxy knows,
        where it requires client keys); a WebSocket upgrade the server passed on as a plain
        request (no WebSocket library installed) is refused as ``_no_websocket`` does."""
        if request.headers.get("upgrade", "").lower() == "websocket":
            return _websocket_refusal()
        try:
            self._client_of(request)
        except BadRequest as exc:
            return _refused(exc)
        try:
            upstream = await self.client(request.client).send(self._upstream_request(request, await request.body(), as_sent=True), stream=True)
        except httpx.HTTPError as exc:
            return JSONResponse({"error": {"message": self._failed(exc)}}, status_code=502)
        return self._streamed(upstream)


class _NoCookies(http.cookiejar.CookieJar):
    """The upstream clients' cookie jar, which keeps nothing: a cookie the upstream sets
    (a provider's edge sets its bot-management ones) is the client's, relayed to it with
    the answer and sent back by it; kept in the shared pool, httpx would add one
    client's cookies to every other client's requests."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None

    def add_cookie_header(self, request: Any) -> None:
        return None


def _websocket_refusal() -> JSONResponse:
    return JSONResponse({"error": {"type": "invalid_request_error", "message": WEBSOCKET_REFUSAL}}, status_code=426)


async def _no_websocket(websocket: WebSocket) -> None:
    """A WebSocket (Codex signed in with ChatGPT tries the Responses API over one first)
    is refused with 426 Upgrade Required, on which Codex goes on over HTTP at once (any
    other refusal has it retry with backoff first): the proxy records HTTP requests."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(_websocket_refusal())
    else:  # a server without the ASGI extension for it: a close before the handshake is a 403
        await websocket.close(code=1008)


def _refused(exc: BadRequest) -> JSONResponse:
    """A request the proxy refuses on a path of no one API (its status, its reason)."""
    return JSONResponse({"error": {"message": f"glyphpack proxy: {exc}"}}, status_code=exc.status)


class _NoDotSegments:
    """Refuses (400) a path with a ``.`` or ``..`` segment, as written or percent-encoded:
    the upstream URL is the ``--upstream`` base joined with the path, and a client's
    ``/../x`` would climb out of a base path (``https://gateway/team-a`` to the gateway's
    root) once the URL is normalized."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path") or scope.get("path", "").encode()
            segments = urllib.parse.unquote(raw.decode("latin-1").split("?", 1)[0]).replace("\\", "/").split("/")
            if any(segment in (".", "..") for segment in segments):
                response = JSONResponse({"error": {"message": "glyphpack proxy: a path with '.' or '..' segments is refused"}}, status_code=400)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


_Relayed = TypeVar("_Relayed", bound=Response)


def _with_headers_of(upstream: httpx.Response, response: _Relayed) -> _Relayed:
    """``response`` with ``upstream``'s headers but the hop-by-hop ones, each as sent: a
    header the upstream repeats stays repeated (two ``set-cookie``s joined into one, as a
    mapping of headers joins them, are one garbled cookie to the client's jar)."""
    for name, value in upstream.headers.multi_items():
        if name.lower() not in _HOP:
            response.headers.append(name, value)
    return response


class _RecordedAfter(Response):
    """A whole answer that is recorded once its bytes are sent (or the client went away
    before they were): ``record``, awaited after the body."""

    def __init__(self, content: bytes, status: int, record: Callable[[], Awaitable[None]]):
        super().__init__(content, status)
        self._record = record

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._record()


def _closed_when_done(task: asyncio.Task[httpx.Response]) -> None:
    """The upstream response ``task`` opens, closed once it has (nobody reads it)."""

    def close(done: asyncio.Task[httpx.Response]) -> None:
        if not done.cancelled() and done.exception() is None:
            asyncio.ensure_future(done.result().aclose())

    task.add_done_callback(close)


def _streams(response: httpx.Response) -> bool:
    return "text/event-stream" in response.headers.get("content-type", "")


class Opened:
    """A streamed response whose first chunks were read (``held``) up to the event that
    shows whether the provider took the request (``failure``: the error body of a refusal
    reported in the stream, else None); ``chunks`` gives every chunk, the held ones
    first, then the rest as it comes."""

    def __init__(self, source: AsyncIterator[bytes], held: list[bytes], failure: Json | None = None):
        self.source, self.held, self.failure = source, held, failure

    @classmethod
    def unread(cls, response: httpx.Response) -> Opened:
        return cls(response.aiter_bytes(), [])

    @classmethod
    async def read(cls, api: Api, response: httpx.Response) -> Opened:
        source = response.aiter_bytes()
        opening, held, size = Opening(api), [], 0
        async for chunk in source:
            held.append(chunk)
            size += len(chunk)
            opening.feed(chunk)
            if opening.decided or size > OPENING_LIMIT:
                break
        return cls(source, held, opening.failure)

    async def chunks(self) -> AsyncIterator[bytes]:
        for chunk in self.held:
            yield chunk
        async for chunk in self.source:
            yield chunk


def error_event(api: Api, message: str) -> bytes:
    """An error as a server-sent event, in the shape the API's stream readers raise."""
    if api == "anthropic":
        return b"event: error\ndata: " + json_bytes(error_body(api, 502, message)) + b"\n\n"
    if api == "openai-responses":
        return b"event: error\ndata: " + json_bytes({"type": "error", "code": "server_error", "message": message, "param": None}) + b"\n\n"
    return b"data: " + json_bytes(error_body(api, 502, message)) + b"\n\n"


def _parsed(raw: bytes, encoding: str | None = None, bodies: BodyParser | None = None, owner: bytes = b"") -> object:
    """``raw`` decoded as its ``content-encoding`` says (``encoding``), as JSON (through
    ``bodies``, which keeps ``owner``'s recent bodies, where given), or the
    ``BadRequest`` that says why not."""
    raw = decoded(raw, encoding)
    try:
        return bodies.parse(raw, owner) if bodies is not None else json.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"the request body is not JSON: {exc}") from None
    except RecursionError:
        raise BadRequest("the request body is nested too deep to read") from None


def listen(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: a free one), bound before the server starts so the
    port can be printed and a failure to bind reported as a usage error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Connections it accepts inherit this: a streamed event goes out when written, not
    # held back (Nagle) until the client acknowledges the last one, 40 ms later.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    return sock


class Running:
    """A proxy served in a background thread (tests, embedding): ``url``, ``stop()``."""

    def __init__(self, proxy: Proxy, host: str = "127.0.0.1", port: int = 0):
        import uvicorn

        class Server(uvicorn.Server):
            """uvicorn's server, whose wait between its ticks ``stop`` cuts short:
            uvicorn's own looks for an exit only every 0.1 s."""

            woken: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

            async def main_loop(self) -> None:
                woken, counter = asyncio.Event(), 0
                self.woken = (asyncio.get_running_loop(), woken)
                while not await self.on_tick(counter):
                    counter = (counter + 1) % 864_000
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(woken.wait(), TICK)

        self.socket = listen(host, port)
        self.url = f"http://{host}:{self.socket.getsockname()[1]}"
        config = uvicorn.Config(proxy.app, log_level="warning", lifespan="on")
        self.server = Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()
        while not self.server.started and self.thread.is_alive():
            threading.Event().wait(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        if self.server.woken is not None:
            loop, woken = self.server.woken
            with contextlib.suppress(RuntimeError):  # the loop closed already: it saw the exit
                loop.call_soon_threadsafe(woken.set)
        self.thread.join(timeout=30)
        self.socket.close()

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Stopped(Exception):
    """SIGINT or SIGTERM, raised again by uvicorn after its graceful shutdown."""


def serve(
    app: Any, host: str, port: int, *, announce: Callable[[str], None] = lambda line: print(line, file=sys.stderr), sock: socket.socket | None = None
) -> None:
    """Serve the ASGI ``app`` (a ``Proxy``'s, ``glyphpack serve``'s) until SIGINT or
    SIGTERM; requests in flight finish first, then it returns (uvicorn raises the signal
    again once it has shut down: caught here, not a crash). ``sock``: a socket already
    listening (several worker processes share one); else one is bound and announced."""
    import signal

    import uvicorn

    own = sock is None
    if sock is None:
        sock = listen(host, port)
        announce(f"http://{host}:{sock.getsockname()[1]}")

    def stopped(number: int, frame: object) -> None:
        raise _Stopped

    previous = {number: signal.signal(number, stopped) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])
    except _Stopped:
        pass
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if own:
            sock.close()
