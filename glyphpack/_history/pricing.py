"""What messages cost in tokens, with text and images priced by a ``Pricer``: one
pricing for the store's trim budget and the compaction ladder's cost model."""

from __future__ import annotations

from .._providers.text_tokens import DEFAULT_ESTIMATOR, TextEstimator
from .messages import Image, Message, Pricer

#: Tokens a provider adds per message (role markers, separators): a published-order guess.
MESSAGE_OVERHEAD = 4
#: Tokens counted for an image when no profile prices it (a full standard Claude page).
IMAGE_TOKENS_ESTIMATE = 1568


def message_tokens(message: Message, pricer: Pricer) -> int:
    """Tokens of one message: its blocks plus the per-message overhead."""
    return MESSAGE_OVERHEAD + sum(block.tokens(pricer) for block in message.content)


class EstimatePricer:
    """Text by a ``TextEstimator``, every image at ``IMAGE_TOKENS_ESTIMATE`` (no profile)."""

    def __init__(self, estimator: TextEstimator = DEFAULT_ESTIMATOR):
        self.estimator = estimator

    def text(self, text: str) -> int:
        return self.estimator.estimate(text)

    def image(self, block: Image) -> int:
        return IMAGE_TOKENS_ESTIMATE
