"""What every provider API module defines: the conversion of neutral messages to and
from its wire format, the rules its server enforces, and how a request goes through
its official SDK and comes back. ``glyphpack._wire`` is the registry."""

from __future__ import annotations

import abc
import dataclasses
import importlib
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from .._errors import HistoryError, UsageError
from .._history.messages import Message
from .._providers.profile import Profile
from .._types import Api, Provider

Json = dict[str, Any]

#: (a label for the provider whose wording it is, the pattern): the named groups are
#: ``measured`` and ``limit`` (tokens), or ``measured``, ``completion`` and ``context``.
OverflowPattern = tuple[str, "re.Pattern[str]"]


def as_dict(response: object) -> Json:
    """An SDK response object (a pydantic model) or an already plain dict, as a dict."""
    if isinstance(response, dict):
        return response
    dump = getattr(response, "model_dump", None)
    if dump is None:
        raise UsageError(f"expected an SDK response (with model_dump) or a dict, not {type(response).__name__}")
    return dump(mode="python", exclude_none=True)


def usage_tokens(data: Json, *keys: str) -> int | None:
    """The input tokens a response reports (the first key, plus the cached ones the
    others name); None when it reports none, or a count no provider gives (under 1),
    which must not calibrate the estimate. A ``usage`` that is not an object (a
    provider or gateway that shapes it otherwise) reports none."""
    usage = data.get("usage") or data.get("usage_metadata") or {}
    if not isinstance(usage, dict):
        return None
    values = [usage.get(k) for k in keys]
    if not isinstance(values[0], int) or isinstance(values[0], bool):
        return None
    total = sum(v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0)
    return total if values[0] > 0 else None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Reply:
    """A parsed response: the assistant message, the input tokens the provider counted
    for the request and the output tokens of the answer (None when the response did not say)."""

    message: Message
    input_tokens: int | None
    output_tokens: int | None = None


class ProviderApi(abc.ABC):
    """One provider API. A subclass is one module of ``glyphpack._wire``; its
    facts are class attributes, its conversions methods."""

    #: The name callers pass (``api="..."``), one of ``glyphpack._types.Api``.
    name: ClassVar[Api]
    #: The reader family whose profiles size its pages.
    provider: ClassVar[Provider]
    #: How its documentation names it ("Messages", "Chat Completions").
    title: ClassVar[str]
    #: The request key that carries the history (what a caller's extras may not set).
    request_key: ClassVar[str]
    #: A key only this API's responses have (to name the API a stray response came from).
    response_key: ClassVar[str]
    #: The module its official SDK's client classes live in, and the package to install.
    sdk_module: ClassVar[str]
    sdk_package: ClassVar[str]
    #: The SDK module's client class.
    client_class: ClassVar[str] = ""
    #: The usage key of a response's output tokens.
    output_usage_key: ClassVar[str]
    #: The environment variables its SDK reads the key from (any one will do).
    key_variables: ClassVar[tuple[str, ...]]
    #: Its "request too long" errors, most specific first (``parse_overflow`` reads them).
    overflow_patterns: ClassVar[tuple[OverflowPattern, ...]] = ()
    overflow_wordings: ClassVar[tuple[OverflowPattern, ...]] = ()

    #: Every API module's class by name (filled as the modules are imported).
    classes: ClassVar[dict[str, type[ProviderApi]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        ProviderApi.classes[cls.name] = cls

    # ----------------------------------------------------------------- conversion

    @abc.abstractmethod
    def to_wire(self, messages: Sequence[Message], profile: Profile | None = None, model: str = "") -> tuple[str | None, list[Json]]:
        """(system prompt or None when the API carries it among the items, the items)."""

    @abc.abstractmethod
    def from_wire(self, items: Sequence[Json], system: str | None = None) -> list[Message]:
        """Neutral messages from the API's items (and its separate system prompt)."""

    @abc.abstractmethod
    def check(self, items: Sequence[Json], *, max_images: int | None = None) -> None:
        """Raise ``HistoryError`` where the API's server would reject ``items``."""

    @abc.abstractmethod
    def recognizes(self, items: Sequence[Json], document: object) -> int:
        """How surely a file's ``items`` are this API's (0: not; 1: plain turns it could
        be; 2: a shape only it has), for importing a bare list."""

    # ----------------------------------------------------------------- requests

    def build(self, model: str, view: Sequence[Message], prefix: int, profile: Profile) -> Json:
        """The create call's keyword arguments for ``view``, whose first ``prefix``
        messages are a stored compaction (the stable prefix), checked against what the
        server enforces."""
        system, items = self.to_wire(view, profile, model)
        self.check(items, max_images=profile.max_images)
        return self.create_arguments(model, system, items)

    def create_arguments(self, model: str, system: str | None, items: list[Json]) -> Json:
        """The create call's keyword arguments for items converted and checked."""
        request: Json = {"model": model, self.request_key: items}
        if system:
            self.put_system(request, system)
        return request

    def put_system(self, request: Json, system: str) -> None:
        raise HistoryError(f"the {self.title} API carries no separate system prompt")

    @abc.abstractmethod
    def send(self, client: Any, request: Json) -> object:
        """``request`` through the official SDK's ``client``; its response."""

    def reply_limit(self, tokens: int) -> Json:
        """The keyword arguments that cap the reply at ``tokens``."""
        return {"max_tokens": tokens}

    @abc.abstractmethod
    def tool(self, name: str, description: str, parameters: Json) -> Json:
        """A function tool's definition (``parameters``: a JSON schema object) as one
        entry of this API's tools list."""

    def with_tools(self, extra: Json, definitions: Sequence[Json]) -> Json:
        """The caller's keyword arguments ``extra`` with ``definitions`` (by ``tool``)
        added after its own tools (a name already there is left as the caller gave it)."""
        tools = extra.get("tools", [])
        if not isinstance(tools, list):
            raise UsageError(f"tools must be a list of {self.title} tool definitions, not {type(tools).__name__}")
        taken = {name for t in tools for name in self.tool_names(t)}
        return {**extra, "tools": [*tools, *(d for d in definitions if not self.tool_names(d) & taken)]}

    def tool_names(self, definition: object) -> set[str]:
        """The function names a tools-list entry defines."""
        name = definition.get("name") if isinstance(definition, dict) else None
        return {name} if isinstance(name, str) else set()

    def parse(self, response: object) -> Reply:
        """The assistant message of a response, and the input tokens it reports."""
        data = as_dict(response)
        messages = self.assistant_messages(data)
        if len(messages) != 1 or messages[0].role != "assistant":
            raise HistoryError(f"a {self.title} response must hold one assistant message, found {[m.role for m in messages]}")
        return Reply(message=messages[0], input_tokens=self.input_tokens(data), output_tokens=usage_tokens(data, self.output_usage_key))

    @abc.abstractmethod
    def assistant_messages(self, data: Json) -> list[Message]:
        """The neutral messages of a response's answer (``not_a`` when it has none)."""

    @abc.abstractmethod
    def input_tokens(self, data: Json) -> int | None:
        """The input tokens a response reports."""

    def not_a(self, data: Json, missing: str) -> HistoryError:
        """The error for a response that is not this API's: what was missing, and which
        API it looks like it came from (nothing is stored)."""
        other = next((name for name, cls in ProviderApi.classes.items() if cls.response_key in data and name != self.name), None)
        hint = f"; it looks like a response of the {other} API: pass api={other!r}" if other else ""
        return HistoryError(f"not a {self.title} response: {missing}{hint}")

    def client(self, base_url: str | None = None, key: str | None = None) -> Any:
        """The official SDK's client, of ``base_url`` (default: the provider's) with
        ``key`` (default: the SDK reads it from its environment variables)."""
        try:
            module = importlib.import_module(self.sdk_module)
        except ImportError as exc:
            raise UsageError(f"the {self.name} API needs the {self.sdk_package} package: pip install {self.sdk_package}") from exc
        options = {name: value for name, value in (("base_url", base_url), ("api_key", key)) if value is not None}
        return self.new_client(module, options)

    def new_client(self, module: Any, options: Json) -> Any:
        """A client of the imported SDK ``module`` with ``options`` (``base_url``,
        ``api_key``: the keyword arguments of the OpenAI and Anthropic clients)."""
        return getattr(module, self.client_class)(**options)
