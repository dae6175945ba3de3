"""A summarizer that asks a model through its official SDK: the ``Summarizer`` the last
rung needs, from a client (or a model id and the key in the environment), with what its
calls were billed counted."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from .._errors import CompactionError, UsageError
from .._history.messages import Message, Text
from .._providers.profile import Profile
from .._providers.resolve import context_window, resolve
from .._types import Api, public
from .._wire import ProviderApi, api_of, merge_extra, native_api, provider_api
from .recovery import parse_overflow
from .summarize import Sent, Summarizer

#: Tokens a summary may take (the reply cap of each summarizer call).
SUMMARY_OUTPUT_TOKENS = 4_000
#: Halvings of a prompt the summarizer's provider still calls too long, at most.
MAX_SPLITS = 3


@dataclasses.dataclass
class SdkSummary:
    """``fn`` of a ``Summarizer``: one prompt in, the model's summary out, through
    ``client``. Counts its calls and the tokens the provider billed for them."""

    client: Any
    api: ProviderApi
    model: str
    profile: Profile
    output_tokens: int = SUMMARY_OUTPUT_TOKENS
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    calls: int = 0
    billed_input: int = 0
    billed_output: int = 0

    def __call__(self, prompt: str) -> str:
        return self._summary(prompt, MAX_SPLITS)

    def _summary(self, prompt: str, splits: int) -> str:
        request = self.api.build(self.model, (Message("user", (Text(prompt),)),), 0, self.profile)
        request = merge_extra(request, {**self.api.reply_limit(self.output_tokens), **self.extra})
        try:
            response = self.api.send(self.client, request)
        except Exception as error:
            if parse_overflow(error) is None:
                raise
            if splits == 0:
                raise CompactionError(f"{self.model} still calls a summary prompt of {len(prompt):,} characters too long") from error
            # The estimate of the summarizer's window was off: halve the transcript at a
            # line (the instructions go with each half) and summarize the halves.
            instructions, _, transcript = prompt.partition("\n\n")
            cut = transcript.rfind("\n", 0, len(transcript) // 2) + 1 or len(transcript) // 2
            halves = (transcript[:cut], transcript[cut:])
            return "\n".join(self._summary(f"{instructions}\n\n{half}", splits - 1).strip() for half in halves if half)
        text = self._text(response)
        if not text.strip():
            raise CompactionError(f"{self.model} answered a summary request with no text")
        return text

    def continued(self, sent: Sent, instruction: str) -> str:
        """A summary asked by continuing the conversation as it was last sent: the same
        messages (cache marks where they were), the same tools, and ``instruction`` as
        one more user message (``Summarizer.continues``); its text ("" when the model
        answered with calls only)."""
        messages = (*sent.messages, Message("user", (Text(instruction),)))
        request = self.api.build(self.model, messages, sent.prefix, self.profile)
        tools = {"tools": list(sent.tools)} if sent.tools else {}
        request = merge_extra(request, {**self.api.reply_limit(self.output_tokens), **tools, **self.extra})
        return self._text(self.api.send(self.client, request))

    def _text(self, response: object) -> str:
        reply = self.api.parse(response)
        self.calls += 1
        self.billed_input += reply.input_tokens or 0
        self.billed_output += reply.output_tokens or 0
        return reply.message.text


@public
def sdk_summarizer(
    client: Any = None,
    model: str = "",
    *,
    api: Api | None = None,
    window: int | None = None,
    output_tokens: int = SUMMARY_OUTPUT_TOKENS,
    continues: bool = False,
    **extra: Any,
) -> Summarizer:
    """A ``Summarizer`` that asks ``model`` through the official SDK ``client`` (an
    ``anthropic``, ``openai`` or ``google-genai`` client; ``api`` picks Responses over
    Chat Completions). Without a client, one is made for the model's provider from the
    key in its usual environment variable. ``window`` defaults to the model's (``glyphpack.context_window``);
    ``extra`` goes into every call (``service_tier``, ``metadata``, ...: what the SDK's
    call takes). Its ``fn`` counts ``calls``, ``billed_input`` and ``billed_output``
    tokens. ``continues``: the model is the session's own, so a summary may continue the
    session's cached conversation (``Summarizer.continues``) rather than send the
    transcript as a fresh prompt.
    """
    if not isinstance(model, str) or not model:
        raise UsageError("a summarizer needs the model id that summarizes, e.g. sdk_summarizer(client, 'claude-haiku-4-5')")
    profile = resolve(model)
    if client is None:
        chosen = provider_api(api) if api else native_api(profile.reader.provider)
        if not any(os.environ.get(name) for name in chosen.key_variables):
            raise UsageError(f"summarizing with {model} needs your key in {' or '.join(chosen.key_variables)}")
        client = chosen.client()
    else:
        chosen = provider_api(api or api_of(client))
    if output_tokens < 1:
        raise UsageError(f"output_tokens must be positive, not {output_tokens}")
    window = window if window is not None else context_window(profile)
    fn = SdkSummary(client, chosen, model, profile, output_tokens, dict(extra))
    return Summarizer(fn, window=window, output_reserve=output_tokens, continues=fn.continued if continues else None)
