"""Local fake servers for the provider APIs, behind the official SDK clients'
``httpx.MockTransport``: they check every request as the real server would, count its
tokens, reject it in the provider's own words when it is over the limit, and answer
like the provider (tool calls from a script, then a final answer). No network.

A ``FakeModel`` holds the script and the limits; ``client(api)`` gives the real SDK
client wired to it.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2 as httpx

from .._errors import UsageError
from .._history.recall import RECALL_TOOL
from .._wire.anthropic import check_anthropic, with_result_content
from .._wire.common import data_url_parts, image_type_of
from .._wire.gemini import check_gemini
from .._wire.openai_chat import check_openai_chat
from .._wire.openai_responses import check_openai_responses

Json = dict[str, Any]


def http() -> ModuleType:
    """The SDKs' HTTP client module: httpx2 in current releases, httpx in older ones."""
    for name in ("httpx2", "httpx"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise UsageError("the fake provider drives the official SDKs: pip install '.[sdk]' in a checkout")

#: Tokens the fake counts per image and per character of text (a crude, fixed tokenizer:
#: what matters is that it is the provider's count, not glyphpack's estimate).
IMAGE_TOKENS = 1_500
CHARS_PER_TOKEN = 3.0
#: ... but as real tokenizers do, denser for what is not words: runs of base64, hex or ids
#: (no space in 40 characters) at this many characters a token, and text outside Latin
#: scripts (Cyrillic, CJK, ...) at one token a character.
DENSE_CHARS_PER_TOKEN = 1.5
_DENSE_RUN = re.compile(r"[A-Za-z0-9+/=_-]{40,}")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def snake_keys(value: Any) -> Any:
    """Gemini's wire JSON (camelCase) in the SDK's snake_case, to check it."""
    if isinstance(value, dict):
        return {_snake(k): snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def image_tokens(block: Json) -> int:
    """The fake's count of one image block, as its provider bills it, when it carries a
    base64 PNG: a Gemini part (``inline_data``) 258 tokens per 768-pixel tile (one when
    both sides are 384 or less); any other by its pixels as Claude bills them (width times
    height over 750, at most ``IMAGE_TOKENS``). ``IMAGE_TOKENS`` when it has no PNG."""
    size = _png_size(block)
    if size is None:
        return IMAGE_TOKENS
    width, height = size
    if "inline_data" in block or "inlineData" in block:
        return 258 if width <= 384 and height <= 384 else 258 * -(-width // 768) * -(-height // 768)
    return min(IMAGE_TOKENS, max(1, -(-width * height // 750)))


def _png_size(block: Json) -> tuple[int, int] | None:
    """(width, height) of the base64 PNG an image block carries, if any."""
    found = [v for v in json.dumps(block).split('"') if len(v) > 40]
    for value in found:
        data = value.split("base64,", 1)[-1].replace("-", "+").replace("_", "/")  # the Gemini SDK sends it URL-safe
        try:
            head = base64.b64decode(data[:64] + "=" * (-len(data[:64]) % 4))
        except ValueError:
            continue
        if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
            return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    return None


def count_tokens(body: Json) -> int:
    """The fake provider's token count of a request body: text by characters (denser for
    runs without spaces and for text outside Latin scripts, as real tokenizers count
    them: base64 at 1.5 characters a token, Chinese at one), images by their pixels
    (``image_tokens``)."""
    images = 0
    chars = 0

    def walk(value: Any) -> None:
        nonlocal images, chars
        if isinstance(value, dict):
            if value.get("type") in ("image", "image_url", "input_image") or "inline_data" in value or "inlineData" in value:
                images += image_tokens(value)
                return
            for key, item in value.items():
                if key not in ("cache_control", "type", "role", "model", "detail"):
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            chars += len(value)
            if len(value) >= 40 or not value.isascii():
                dense.append(value)

    dense: list[str] = []
    walk({k: v for k, v in body.items() if k not in ("tools", "max_tokens", "model")})
    extra = 0.0
    for text in dense:
        runs = sum(len(run) for run in _DENSE_RUN.findall(text))
        foreign = sum(1 for c in text if ord(c) > 0x24F) if not text.isascii() else 0
        extra += runs * (1 / DENSE_CHARS_PER_TOKEN - 1 / CHARS_PER_TOKEN) + foreign * (1 - 1 / CHARS_PER_TOKEN)
    return int(chars / CHARS_PER_TOKEN + extra) + images


@dataclasses.dataclass
class Turn:
    """One scripted answer: tool calls (name, arguments) or a final text."""

    text: str = ""
    calls: tuple[tuple[str, Json], ...] = ()


#: A scripted ``glyphpack_recall`` argument the fake replaces with the newest ref a
#: glyphpack note in the request names (as a model reading the note would).
NEWEST_REF = "<the newest ref a note names>"
_REF = re.compile(r'ref \\"([^"\\]+)\\"')  # a ref as json.dumps shows it (ids have no quotes)


def _read_refs(turn: Turn, body: Json, api: str) -> tuple[Turn, str | None]:
    """``turn`` with ``NEWEST_REF`` arguments made the newest ref the request shows;
    a problem when the request does not define ``glyphpack_recall`` or shows no ref."""
    text = json.dumps(body)
    defined = RECALL_TOOL in json.dumps(body.get("tools", body.get("config", {}).get("tools", [])))
    if not defined:
        return turn, f"the model called {RECALL_TOOL}, which this request does not define"
    refs = _REF.findall(text)
    if not refs:
        return turn, f"the model called {RECALL_TOOL}, but no note in this request names a ref"
    calls = tuple((n, {k: refs[-1] if v == NEWEST_REF else v for k, v in a.items()}) for n, a in turn.calls)
    return dataclasses.replace(turn, calls=calls), None


@dataclasses.dataclass
class FakeModel:
    """The model behind every fake API: answers ``script`` in order (the last turn
    repeats), rejects requests over ``limit`` tokens, and injects ``faults`` by request
    number (1-based): ``"413"``, ``"429"``, ``"529"`` (overloaded), ``"401"`` (a key
    refused), ``"overflow"`` (a "too long" 400 whatever the size).

    ``summary_faults`` injects the same faults (and ``"garbage"``: a 200 whose body is
    not JSON; ``"empty"``: an answer with no text) into summary requests alone, by their
    own number (1-based; 0: every one): a provider refuses a side request as readily as
    any other."""

    script: list[Turn]
    limit: int = 1_000_000
    faults: dict[int, str] = dataclasses.field(default_factory=dict)
    summary_faults: dict[int, str] = dataclasses.field(default_factory=dict)
    summaries: int = 0  # summary requests received
    requests: list[Json] = dataclasses.field(default_factory=list)  # every body received, in order
    statuses: list[int] = dataclasses.field(default_factory=list)
    #: Each request's path (Gemini streams at ``:streamGenerateContent``; "" in process).
    paths: list[str] = dataclasses.field(default_factory=list)
    signed: dict[str, str] = dataclasses.field(default_factory=dict)  # Gemini call id -> the signature it issued
    encrypted: dict[str, str] = dataclasses.field(default_factory=dict)  # Responses reasoning id -> its encrypted content
    #: Responses stored by id (``store`` not false, as the API's default keeps them): the
    #: input they answered and their output, which ``previous_response_id`` continues.
    stored: dict[str, list[Json]] = dataclasses.field(default_factory=dict)
    answered: int = 0
    on_request: Callable[[int], None] | None = None
    #: Characters of each Responses reasoning item's encrypted content (a real one runs
    #: to thousands; the fake counts them as any text it is sent).
    reasoning_chars: int = 37
    #: Whether Gemini's function calls carry an id: optional in the API, and absent from
    #: what ADK passes on and from older Gemini models' answers.
    gemini_call_ids: bool = True

    def next_turn(self) -> Turn:
        turn = self.script[min(self.answered, len(self.script) - 1)]
        self.answered += 1
        return turn

    # ------------------------------------------------------------------ transport

    def handler(self, api: str) -> Callable[[httpx.Request], httpx.Response]:
        def handle(request: httpx.Request) -> httpx.Response:
            return self.answer(api, json.loads(request.content), request.url.path)

        return handle

    def answer(self, api: str, body: Json, path: str = "") -> httpx.Response:
        """The response to one request ``body`` of ``api`` (at ``path``), counted."""
        self.requests.append(body)
        self.paths.append(path)
        number = len(self.requests)
        if self.on_request is not None:
            self.on_request(number)
        response = self._respond(api, body, number, path)
        self.statuses.append(response.status_code)
        return response

    def _respond(self, api: str, body: Json, number: int, path: str = "") -> httpx.Response:
        fault = self.faults.get(number)
        if summary_prompt(body) is not None:
            self.summaries += 1
            fault = self.summary_faults.get(self.summaries) or self.summary_faults.get(0) or fault
            if fault == "garbage":
                return http().Response(200, content=b"<html>upstream busy</html>", headers={"content-type": "text/html"})
            if fault == "empty":
                return http().Response(200, json=answer_body(api, Turn(text=""), number, count_tokens(body)))
        if fault == "429":
            return error_response(api, 429, "rate_limit", headers={"retry-after-ms": "1", "retry-after": "0"})
        if fault in ("529", "401"):
            return error_response(api, int(fault), "overloaded" if fault == "529" else "key")
        if fault == "413":
            return error_response(api, 413, "bytes")
        if api == "openai-responses" and isinstance(body.get("input"), str):  # a string is one user message
            body = {**body, "input": [{"role": "user", "content": body["input"]}]}
        if api == "openai-responses" and "previous_response_id" in body:
            # The conversation the API holds goes first, as the model sees it.
            previous = body["previous_response_id"]
            if previous not in self.stored:
                return error_response(api, 400, "invalid", message=f"Previous response with id '{previous}' not found.")
            body = {**body, "input": [*self.stored[previous], *(body.get("input") or [])]}
        check = {"anthropic": _check_anthropic, "openai-chat": _check_chat, "openai-responses": _check_responses, "gemini": _check_gemini}
        problem = check[api](body) or (_check_gemini_3(body, self.signed) if api == "gemini" and GEMINI_3.search(path) else None)
        problem = problem or (_check_reasoning(body, self.encrypted) if api == "openai-responses" else None)
        if problem:
            return error_response(api, 400, "invalid", message=problem)
        tokens = count_tokens(body)
        if fault == "overflow":  # a window just under this request, whatever its size
            return error_response(api, 400, "too_long", tokens=tokens, limit=tokens - 1)
        if tokens > self.limit:
            return error_response(api, 400, "too_long", tokens=tokens, limit=self.limit)
        prompt = summary_prompt(body)
        # A summarizer's call is answered with a summary; the script waits for the agent's next call.
        turn = Turn(text=fake_summary(prompt)) if prompt is not None else self.next_turn()
        if any(name == RECALL_TOOL for name, _ in turn.calls):
            turn, problem = _read_refs(turn, body, api)
            if problem:  # a model calls only the tools a request defines
                return error_response(api, 400, "invalid", message=problem)
        answer = answer_body(api, turn, number, tokens)
        if api == "openai-responses" and "reasoning.encrypted_content" in (body.get("include") or ()):
            reasoning = answer["output"][0]
            sealed = "gAAAA" + "".join(uuid.uuid4().hex for _ in range(max(1, -(-(self.reasoning_chars - 5) // 32))))
            reasoning["encrypted_content"] = self.encrypted[reasoning["id"]] = sealed[: max(37, self.reasoning_chars)]
        if api == "openai-responses" and body.get("store") is not False:
            self.stored[answer["id"]] = [*(body.get("input") or []), *answer["output"]]
        if api == "gemini":  # what it signed must come back signed, as it was
            for part in answer["candidates"][0]["content"]["parts"]:
                if "thoughtSignature" in part:
                    self.signed[part["functionCall"]["id"]] = part["thoughtSignature"]
                if not self.gemini_call_ids and "functionCall" in part:
                    del part["functionCall"]["id"]
        return http().Response(200, json=answer)

    def async_handler(self, api: str) -> Callable[[httpx.Request], Awaitable[httpx.Response]]:
        """``handler`` for ``httpx.MockTransport`` under an async client (the SDKs'
        ``AsyncOpenAI``, ``AsyncAnthropic``, as agent frameworks use them)."""
        handle = self.handler(api)

        async def answer(request: httpx.Request) -> httpx.Response:
            await request.aread()
            response = handle(request)
            return http().Response(response.status_code, headers=response.headers, content=response.content)

        return answer

    def client(self, api: str) -> Any:
        """The official SDK client for ``api``, talking to this fake (retries fast)."""
        transport = http().Client(transport=http().MockTransport(self.handler(api)))
        if api == "anthropic":
            import anthropic

            return anthropic.Anthropic(api_key="test", http_client=transport, max_retries=2)
        if api in ("openai-chat", "openai-responses"):
            import openai

            return openai.OpenAI(api_key="test", http_client=transport, max_retries=2)
        from google import genai
        from google.genai import types

        options = types.HttpOptions(httpx_client=transport, retry_options=types.HttpRetryOptions(attempts=3, initial_delay=0.01))
        return genai.Client(api_key="test", http_options=options)


def _check(check: Callable[[Any], None], value: Any) -> str | None:
    try:
        check(value)
    except Exception as exc:  # any failure is the server's 400
        return f"invalid request: {exc}"
    return None


#: Anthropic's limit on prompt-cache breakpoints in one request.
CACHE_MARKS = 4


def _check_anthropic(body: Json) -> str | None:
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return "messages: Input should be a valid list of objects"  # as the API words a field of the wrong type
    marks = json.dumps([body.get("system"), body.get("tools"), body.get("messages")]).count('"cache_control"')
    if marks > CACHE_MARKS:
        return f"A maximum of {CACHE_MARKS} blocks with cache_control may be provided. Found {marks}."
    blocks = [b for m in body.get("messages") or () if isinstance(m.get("content"), list) for b in m["content"]]
    if not body.get("tools") and any(b.get("type") in ("tool_use", "tool_result") for b in blocks):
        return "Requests which include `tool_use` or `tool_result` blocks must define tools."
    sources = [b.get("source") or {} for b in with_result_content(blocks) if b.get("type") == "image"]
    sent = [(s.get("media_type"), s.get("data")) for s in sources if s.get("type") == "base64"]
    return _mislabelled(sent) or _check(check_anthropic, body.get("messages"))


def _mislabelled(images: Sequence[tuple[object, object]]) -> str | None:
    """The providers' 400 for an image whose bytes are not the type it is labelled."""
    for label, data in images:
        try:
            actual = image_type_of(base64.b64decode(str(data), validate=True))
        except ValueError:
            return "invalid request: an image's data is not valid base64"
        if actual is not None and actual != label:
            return f"invalid request: Image does not match the provided media type {label}"
    return None


def _data_urls(parts: Sequence[object]) -> list[tuple[str, str]]:
    """(label, base64 data) of each ``data:`` URL image among OpenAI content parts."""
    out = []
    for part in parts:
        url = part.get("image_url") if isinstance(part, dict) else None
        found = data_url_parts(url.get("url") if isinstance(url, dict) else url)
        if found is not None:
            out.append(found)
    return out


def _check_chat(body: Json) -> str | None:
    parts = [p for m in body.get("messages") or () if isinstance(m.get("content"), list) for p in m["content"]]
    return _mislabelled(_data_urls(parts)) or _check(check_openai_chat, body.get("messages"))


def _check_responses(body: Json) -> str | None:
    given = body.get("input")
    items: list[Any] = given if isinstance(given, list) else []
    parts = [p for i in items if isinstance(i, dict) for key in ("content", "output") if isinstance(i.get(key), list) for p in i[key]]
    return _mislabelled(_data_urls(parts)) or _check(check_openai_responses, body.get("input"))


def _check_gemini(body: Json) -> str | None:
    contents = snake_keys(body.get("contents"))
    for content in contents or ():
        for part in content.get("parts", ()):
            data = (part.get("inline_data") or {}).get("data")
            if data is not None:  # the SDK encodes bytes once, URL-safe (which the API takes too)
                raw = base64.b64decode(data.replace("-", "+").replace("_", "/"), validate=True)
                if not raw.startswith(b"\x89PNG"):
                    return "invalid request: inline_data is not a PNG (encoded twice?)"
    return _check(check_gemini, contents)


#: Gemini 3 and later (the model is in the URL: /models/gemini-3-pro:generateContent).
GEMINI_3 = re.compile(r"/models/gemini-([3-9]|\d\d)")


def _check_gemini_3(body: Json, signed: dict[str, str]) -> str | None:
    """Gemini 3 rejects a request whose current turn (after the last user text) has a
    model turn with function calls and no thought signature on the first of them; and a
    signature it issued that comes back changed ("Invalid thought signature"): a
    signature that comes back is the one it gave (``signed``: call id -> base64)."""
    contents = snake_keys(body.get("contents")) or []
    starts = [i for i, c in enumerate(contents) if c.get("role") == "user" and any("text" in p for p in c.get("parts", ()))]
    for index, content in enumerate(contents):
        calls = [p for p in content.get("parts", ()) if "function_call" in p]
        if content.get("role") != "model" or not calls:
            continue
        first, sent = calls[0], calls[0].get("thought_signature")
        issued = signed.get(first["function_call"].get("id", ""))
        if issued is not None and sent != issued:
            return f"Invalid thought signature: function call `{first['function_call'].get('name')}` came back {'without' if sent is None else 'with another'} one"
        if index > (starts[-1] if starts else -1) and not sent:
            return f"Function call is missing a thought_signature in functionCall parts. function call `{first['function_call'].get('name')}`"
    return None


def _check_reasoning(body: Json, issued: dict[str, str]) -> str | None:
    """Reasoning items sent back: with ``store`` false, only with the encrypted content
    they were issued with (the id alone names nothing stored); that content must be
    the one issued, byte for byte."""
    for item in body.get("input") or ():
        if not isinstance(item, dict) or item.get("type") != "reasoning":
            continue
        sent, given = item.get("encrypted_content"), issued.get(str(item.get("id")))
        if sent is None and body.get("store") is False:
            return f"Item with id '{item.get('id')}' not found. Items are not persisted when `store` is set to false."
        if sent is not None and sent != given:
            return f"The encrypted content for item {item.get('id')} could not be verified."
    return None


#: How glyphpack's summarizer prompts begin (``Summarizer.instructions``).
SUMMARY_REQUEST = "Summarize this part of an agent's conversation"


def summary_prompt(body: Json) -> str | None:
    """The prompt of a summarizer's request (a text that begins with its instructions), or None."""
    stack: list[Any] = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, str) and value.startswith(SUMMARY_REQUEST):
            return value
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return None


def fake_summary(prompt: str) -> str:
    """What the fake model makes of a transcript: the user's words and every tool call
    with its first argument line, in order (a summary that keeps what matters to a test)."""
    kept: list[str] = []
    lines = prompt.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("[user] "):
            kept.append(line[len("[user] "):])
        elif line.startswith("[tool call "):
            argument = lines[number + 1] if number + 1 < len(lines) else ""
            kept.append(f"called {line[len('[tool call '):].split(' ')[0]} ({argument})")
    return "Summary: " + ("; ".join(kept) if kept else "nothing of note") + "."


# ---------------------------------------------------------------------- answers


def answer_body(api: str, turn: Turn, number: int, tokens: int) -> Json:
    ids = [f"call_{uuid.uuid4().hex[:16]}" for _ in turn.calls]  # unique across processes, as a provider's are
    if api == "anthropic":
        content: list[Json] = [{"type": "text", "text": turn.text}] if turn.text else []
        content += [{"type": "tool_use", "id": f"toolu_{i}", "name": n, "input": a} for i, (n, a) in zip(ids, turn.calls)]
        return {
            "id": f"msg_{number}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": content, "stop_reason": "tool_use" if turn.calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": tokens, "output_tokens": 50, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        }
    if api == "openai-chat":
        message: Json = {"role": "assistant", "content": turn.text or None, "refusal": None}
        if turn.calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, (n, a) in zip(ids, turn.calls)
            ]
        return {
            "id": f"chatcmpl-{number}", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-5.4",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if turn.calls else "stop", "logprobs": None}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 50, "total_tokens": tokens + 50},
        }
    if api == "openai-responses":
        output: list[Json] = [{"type": "reasoning", "id": f"rs_{number}", "summary": []}]
        if turn.text:
            output.append({"type": "message", "id": f"msg_{number}", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": turn.text, "annotations": []}]})
        output += [{"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": n, "arguments": json.dumps(a), "status": "completed"}
                   for i, (n, a) in zip(ids, turn.calls)]
        return {
            "id": f"resp_{number}", "object": "response", "created_at": 1_700_000_000, "model": "gpt-5.4", "status": "completed",
            "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": tokens, "output_tokens": 50, "total_tokens": tokens + 50,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
        }
    parts: list[Json] = [{"text": turn.text}] if turn.text else []
    signature = base64.b64encode(f"sig-{number}".encode()).decode()
    # Parallel calls carry one signature, on the first (as Gemini 3 sends them).
    parts += [{"functionCall": {"id": i, "name": n, "args": a}} | ({"thoughtSignature": signature} if k == 0 else {})
              for k, (i, (n, a)) in enumerate(zip(ids, turn.calls))]
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": tokens, "candidatesTokenCount": 50, "totalTokenCount": tokens + 50},
        "modelVersion": "gemini-3-pro",
    }


def error_response(api: str, status: int, kind: str, *, message: str = "", tokens: int = 0, limit: int = 0, headers: dict[str, str] | None = None) -> httpx.Response:
    """An error as each provider words and shapes it."""
    if kind == "too_long":
        message = {
            "anthropic": f"prompt is too long: {tokens} tokens > {limit} maximum",
            "openai-chat": f"This model's maximum context length is {limit} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages.",
            "openai-responses": "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "gemini": f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit}).",
        }[api]
    elif kind == "bytes":
        message = "Request exceeds the maximum allowed number of bytes." if api == "anthropic" else "Request Entity Too Large"
    elif kind == "rate_limit":
        message = "Rate limit reached for requests. Please try again in 1ms."
    elif kind == "overloaded":
        message = "Overloaded"
    elif kind == "key":
        message = "invalid x-api-key" if api == "anthropic" else "Incorrect API key provided: sk-***. You can find your API key at your account page."
    if api == "anthropic":
        error_type = {"too_long": "invalid_request_error", "invalid": "invalid_request_error", "bytes": "request_too_large", "rate_limit": "rate_limit_error",
                      "overloaded": "overloaded_error", "key": "authentication_error"}[kind]
        body: Json = {"type": "error", "error": {"type": error_type, "message": message}}
    elif api == "gemini":
        state = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 529: "UNAVAILABLE"}[status]
        body = {"error": {"code": status, "message": message, "status": state}}
    else:
        code = {"too_long": "context_length_exceeded", "invalid": None, "bytes": None, "rate_limit": "rate_limit_exceeded", "overloaded": None,
                "key": "invalid_api_key"}[kind]
        error_type = "invalid_request_error" if status in (400, 401) else "server_error" if status == 529 else "requests"
        body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return http().Response(status, json=body, headers=headers or {})


# ---------------------------------------------------------------------- over HTTP

#: The paths a ``FakeUpstream`` answers, and the API each speaks.
UPSTREAM_PATHS = {"/v1/messages": "anthropic", "/v1/chat/completions": "openai-chat", "/v1/responses": "openai-responses"}
#: Gemini's REST paths (the model and method in the path; streamed with ``?alt=sse``).
GEMINI_PATH = re.compile(r"/v1(beta)?/models/[^/:]+:(generateContent|streamGenerateContent)")


def sse_events(api: str, answer: Json, *, usage: bool = False) -> list[bytes]:
    """``answer`` (a non-streaming response body) as the server-sent events the API
    streams it in: text in two pieces, tool arguments as partial JSON, then the end
    (Chat's usage chunk only when the request asked for it with ``usage``)."""

    def event(name: str | None, data: Json | str) -> bytes:
        payload = data if isinstance(data, str) else json.dumps(data)
        return (f"event: {name}\n" if name else "").encode() + f"data: {payload}\n\n".encode()

    def halves(text: str) -> list[str]:
        return [text[: len(text) // 2], text[len(text) // 2 :]]

    if api == "anthropic":
        head = {**answer, "content": [], "stop_reason": None, "usage": {**answer["usage"], "output_tokens": 1}}
        out = [event("message_start", {"type": "message_start", "message": head}), event("ping", {"type": "ping"})]
        for index, block in enumerate(answer["content"]):
            start: Json
            if block["type"] == "text":
                start, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": t} for t in halves(block["text"])]
            else:
                start = {**block, "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": t} for t in halves(json.dumps(block["input"]))]
            out.append(event("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
            out += [event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
            out.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
        end = {"stop_reason": answer["stop_reason"], "stop_sequence": None}
        out.append(event("message_delta", {"type": "message_delta", "delta": end, "usage": {"output_tokens": answer["usage"]["output_tokens"]}}))
        return [*out, event("message_stop", {"type": "message_stop"})]
    if api == "gemini":  # each event a response of its own: the text in two pieces, then the calls, the end and usage
        candidate = answer["candidates"][0]
        texts = [p for p in candidate["content"]["parts"] if "text" in p]
        calls = [p for p in candidate["content"]["parts"] if "text" not in p]
        pieces = [{"text": t} for p in texts for t in halves(p["text"]) if t]

        def piece(parts: list[Json], last: bool) -> bytes:
            body: Json = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}], "modelVersion": answer["modelVersion"]}
            if last:
                body["candidates"][0]["finishReason"] = candidate["finishReason"]
                body["usageMetadata"] = answer["usageMetadata"]
            return event(None, body)

        groups = [[p] for p in pieces[:-1]] + [pieces[-1:] + calls]
        return [piece(parts, n == len(groups) - 1) for n, parts in enumerate(groups)]
    if api == "openai-chat":
        head = {k: answer[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        message = answer["choices"][0]["message"]

        def chunk(delta: Json, finish: str | None = None) -> bytes:
            return event(None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        out = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"content": t}) for t in halves(message["content"] or "") if t]
        for index, call in enumerate(message.get("tool_calls") or ()):
            first = {"index": index, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}
            out.append(chunk({"tool_calls": [first]}))
            out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": t}}]}) for t in halves(call["function"]["arguments"])]
        out.append(chunk({}, answer["choices"][0]["finish_reason"]))
        if usage:
            out.append(event(None, {**head, "choices": [], "usage": answer["usage"]}))
        return [*out, event(None, "[DONE]")]
    created = {**answer, "status": "in_progress", "output": []}
    events: list[tuple[str, Json]] = [("response.created", {"response": created}), ("response.in_progress", {"response": created})]
    for index, item in enumerate(answer["output"]):
        at = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            events.append(("response.output_item.added", {"output_index": index, "item": {**item, "status": "in_progress", "content": []}}))
            for part, content in enumerate(item["content"]):
                events.append(("response.content_part.added", {**at, "content_index": part, "part": {**content, "text": ""}}))
                events += [("response.output_text.delta", {**at, "content_index": part, "delta": t, "logprobs": []}) for t in halves(content["text"])]
                events.append(("response.output_text.done", {**at, "content_index": part, "text": content["text"], "logprobs": []}))
                events.append(("response.content_part.done", {**at, "content_index": part, "part": content}))
        elif item["type"] == "function_call":
            events.append(("response.output_item.added", {"output_index": index, "item": {**item, "status": "in_progress", "arguments": ""}}))
            events += [("response.function_call_arguments.delta", {**at, "delta": t}) for t in halves(item["arguments"])]
            events.append(("response.function_call_arguments.done", {**at, "arguments": item["arguments"]}))
        else:
            events.append(("response.output_item.added", {"output_index": index, "item": item}))
        events.append(("response.output_item.done", {"output_index": index, "item": item}))
    events.append(("response.completed", {"response": answer}))
    return [event(name, {"type": name, "sequence_number": number, **fields}) for number, (name, fields) in enumerate(events)]


def failed_events(error: Json) -> list[bytes]:
    """A Responses stream that reports ``error`` (an error body's ``error``) as a failed
    response, after the events that open every stream."""
    response = {"id": "resp_failed", "object": "response", "created_at": 1_700_000_000, "model": "gpt-5.4", "output": [], "usage": None}
    events = [
        ("response.created", {"response": {**response, "status": "in_progress", "error": None}}),
        ("response.in_progress", {"response": {**response, "status": "in_progress", "error": None}}),
        ("response.failed", {"response": {**response, "status": "failed", "error": {"code": error.get("code"), "message": error.get("message")}}}),
    ]
    return [f"event: {name}\ndata: {json.dumps({'type': name, 'sequence_number': n, **fields})}\n\n".encode() for n, (name, fields) in enumerate(events)]


class FakeUpstream:
    """A ``FakeModel`` behind a real HTTP server on 127.0.0.1 (a thread), answering
    ``UPSTREAM_PATHS`` as the providers do, streamed (server-sent events) when the
    request asks, and Anthropic's ``/v1/messages/count_tokens``. ``url`` is its base;
    ``headers`` records every request's headers, ``paths`` every path asked for.

    ``route`` (optional) picks the model for a request body: a harness like Claude Code
    sends side requests (titles, summaries) that must not take the script's turns.

    Every answer to a POST sets two cookies of its own in two ``set-cookie`` headers, as
    OpenAI's edge does (Cloudflare's ``__cf_bm`` and ``_cfuvid``; not ``Secure`` here, so
    that clients send them back over plain HTTP as they would over HTTPS); ``cookies``
    records them with the request they answered.
    """

    def __init__(
        self, model: FakeModel, *, route: Callable[[Json], FakeModel] | None = None, event_delay: float = 0.0, refusals_in_stream: bool = False
    ):
        """``event_delay``: seconds between a stream's events (a model generating).
        ``refusals_in_stream``: a streamed Responses request refused as too long is
        answered 200 with the refusal inside the stream (``response.created``,
        ``response.in_progress``, then ``response.failed`` with ``context_length_exceeded``),
        as the Responses API may report it and as Codex's own tests model it."""
        self.refusals_in_stream = refusals_in_stream
        import http.server
        import threading

        self.event_delay = event_delay
        self.model = model
        self.route = route or (lambda body: model)
        self.headers: list[dict[str, str]] = []
        #: Each POST's headers as sent, repeats included (``headers`` keeps the last of a name).
        self.raw_headers: list[list[tuple[str, str]]] = []
        self.paths: list[str] = []
        #: Each POST's path and content-encoding ("" for none): a body may come compressed.
        self.encodings: list[tuple[str, str]] = []
        #: Each POST's query string ("" for none): Gemini's clients may send their key there.
        self.queries: list[str] = []
        #: Every connection a POST came on, as its client's (host, port): a client that
        #: keeps its connections open sends many requests on one.
        self.connections: set[tuple[str, int]] = set()
        #: Each answer to a POST: (the cookies it set, ``name=value`` each; the cookie
        #: header its request carried, "" for none). Not the body: ``model.requests``
        #: has it, and a benchmark may clear that.
        self.cookies: list[tuple[tuple[str, ...], str]] = []
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # each event goes out as it is written, as a provider's do

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                upstream._answer(self)

            def do_GET(self) -> None:
                upstream.paths.append(self.path)
                upstream.headers.append({k.lower(): v for k, v in self.headers.items()})
                self._reply(404, b'{"type":"error","error":{"type":"not_found_error","message":"Not found"}}')

            def _reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                upstream._set_cookie(self)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 128  # many clients at once, as a provider takes them

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # Polled often: a test that closes it waits for the next poll (0.5 s by default).
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def _answer(self, handler: Any) -> None:
        path, _, query = handler.path.partition("?")
        self.connections.add(handler.client_address[:2])
        self.paths.append(path)
        self.queries.append(query)
        self.headers.append({k.lower(): v for k, v in handler.headers.items()})
        self.raw_headers.append([(k.lower(), v) for k, v in handler.headers.items()])
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length)
        # A compressed body is read as the providers read it (Codex signed in with ChatGPT sends zstd).
        encoding = (handler.headers.get("content-encoding") or "").strip().lower()
        self.encodings.append((path, encoding))
        if encoding not in ("", "identity", "zstd", "gzip"):
            handler._reply(415, b'{"error":{"message":"unsupported content-encoding"}}')
            return
        if encoding == "zstd":
            import zstandard

            raw = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True).read()
        elif encoding == "gzip":
            import gzip

            raw = gzip.decompress(raw)
        try:
            body = json.loads(raw)
        except ValueError:
            handler._reply(400, b'{"error":{"message":"body is not JSON"}}')
            return
        if path == "/v1/messages/count_tokens":
            problem = _check(check_anthropic, body.get("messages"))
            status, answer = (400, {"type": "error", "error": {"type": "invalid_request_error", "message": problem}}) if problem else (200, {"input_tokens": count_tokens(body)})
            handler._reply(status, json.dumps(answer).encode())
            return
        api = UPSTREAM_PATHS.get(path) or ("gemini" if GEMINI_PATH.fullmatch(path) else None)
        if api is None:
            handler._reply(404, b'{"error":{"message":"no such path"}}')
            return
        if api == "gemini" and "model" in body:  # the REST API names the model in the path only
            handler._reply(400, b'{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name \\"model\\": Cannot find field.","status":"INVALID_ARGUMENT"}}')
            return
        response = self.route(body).answer(api, body, path)
        streamed = path.endswith(":streamGenerateContent") if api == "gemini" else body.get("stream")
        if streamed and api == "openai-responses" and self.refusals_in_stream and response.status_code == 400:
            error = response.json()["error"]
            if error.get("code") == "context_length_exceeded":
                self._stream(handler, failed_events(error))
                return
        if response.status_code != 200 or not streamed:
            handler._reply(response.status_code, response.content, response.headers.get("content-type", "application/json"))
            return
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self._stream(handler, sse_events(api, response.json(), usage=usage))

    def _set_cookie(self, handler: Any) -> None:
        """An answer to a POST sets two cookies of its own, as a provider's edge does."""
        if handler.command == "POST":
            cookies = (f"__cf_bm=edge-{uuid.uuid4().hex[:12]}", f"_cfuvid=visitor-{uuid.uuid4().hex[:12]}")
            self.cookies.append((cookies, handler.headers.get("cookie") or ""))
            handler.send_header("set-cookie", f"{cookies[0]}; path=/; expires=Thu, 01-Jan-2099 00:00:00 GMT; HttpOnly; SameSite=None")
            handler.send_header("set-cookie", f"{cookies[1]}; path=/; HttpOnly; SameSite=None")

    def _stream(self, handler: Any, events: list[bytes]) -> None:
        handler.send_response(200)
        self._set_cookie(handler)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()
        for number, piece in enumerate(events):
            if number and self.event_delay:
                time.sleep(self.event_delay)
            handler.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeUpstream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
