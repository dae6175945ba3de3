"""The provider APIs, one module each, behind one registry keyed by the API's name.

Each module (``anthropic``, ``openai_chat``, ``openai_responses``, ``gemini``) holds
everything about its API: neutral messages to and from its wire format (``to_*`` and
``from_*``), what its server rejects (``check_*``), and a ``ProviderApi`` subclass that
builds a request, sends it through the official SDK, parses the response, and names the
API's SDK, key variables and "too long" errors. The CLI, eval, the session, the plain
importer and overflow recovery read ``REGISTRY`` and never name an API themselves.

Adding a provider API:

1. write ``glyphpack/_wire/<name>.py`` (the name with ``_`` for ``-``): its
   converters and checker, and a ``ProviderApi`` subclass instantiated as ``API``
   (``tests/test_apis.py`` runs every registered API through the same contract);
2. add its name to ``Api`` in ``glyphpack/_types.py``, which is the registry's list.

Rendered pages as that API's image blocks (``Page.to_block``) come from
``glyphpack/_providers/blocks.py``: the renderer sits below this layer, so a new
vision API also adds its image part there.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .._errors import UsageError
from .._history.recall import RECALL_DESCRIPTION, RECALL_PARAMETERS, RECALL_TOOL
from .._types import APIS, Api, Provider, check_kind, public
from .base import Json, ProviderApi, Reply, as_dict, usage_tokens

__all__ = ["REGISTRY", "Json", "ProviderApi", "Reply", "api_of", "as_dict", "merge_extra", "native_api", "provider_api", "recall_tool", "usage_tokens"]


def _load(name: Api) -> ProviderApi:
    api = importlib.import_module(f"{__name__}.{name.replace('-', '_')}").API
    if not isinstance(api, ProviderApi) or api.name != name:
        raise TypeError(f"glyphpack._wire.{name.replace('-', '_')}.API must be the {name!r} ProviderApi")
    return api


#: Every provider API by name, in ``Api``'s order.
REGISTRY: Mapping[Api, ProviderApi] = MappingProxyType({name: _load(name) for name in APIS})


def provider_api(name: object, error: type[Exception] = UsageError) -> ProviderApi:
    """The registered API called ``name``; ``error`` naming the choices if there is none."""
    return REGISTRY[check_kind(name, APIS, "api", error)]


def native_api(provider: Provider) -> ProviderApi:
    """The first registered API of a provider family (its own, for a model id alone)."""
    return next(api for api in REGISTRY.values() if api.provider == provider)


def api_of(client: object) -> Api:
    """The API an official SDK client speaks: the first registered API of the client's
    SDK (for OpenAI that is Chat Completions: pass ``api="openai-responses"`` for Responses)."""
    module = type(client).__module__
    for name, api in REGISTRY.items():
        if module == api.sdk_module or module.startswith(api.sdk_module + "."):
            return name
    *others, last = dict.fromkeys(api.sdk_package for api in REGISTRY.values())
    raise UsageError(f"{type(client).__name__} ({module}) is not an {', '.join(others)} or {last} client; pass api=...")


def merge_extra(request: Json, extra: Mapping[str, Any]) -> Json:
    """The caller's own keyword arguments added to a request (``config`` merged key by key)."""
    built = {api.request_key for api in REGISTRY.values()}
    out = dict(request)
    for key, value in extra.items():
        if key in built:
            raise UsageError(f"{key!r} is what the session builds; pass the rest (tools, max_tokens, ...)")
        if key == "config" and isinstance(value, dict):
            out["config"] = {**out.get("config", {}), **value}
        else:
            out[key] = value
    return out


@public
def recall_tool(api: Api) -> dict[str, object]:
    """The ``glyphpack_recall`` tool as one entry of ``api``'s tools list, for a harness
    that builds its requests itself (a ``Session`` opened with ``recall=True`` adds it)."""
    return provider_api(api).tool(RECALL_TOOL, RECALL_DESCRIPTION, RECALL_PARAMETERS)
