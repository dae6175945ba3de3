"""The ladder's cost model: what messages cost one reader, text estimated, images exact."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

from .._history.messages import CATEGORIES, Block, Category, Image, Message
from .._history.prefixes import PrefixFolds
from .._history.pricing import MESSAGE_OVERHEAD, message_tokens
from .._providers.profile import Profile
from .._providers.resolve import resolve, text_estimator
from .._providers.text_tokens import DEFAULT_ESTIMATOR, TextEstimator

#: Tokens assumed for an image whose size or price is unknown (a full standard Claude page).
UNKNOWN_IMAGE_TOKENS = 1568
#: The size an unreadable image is priced at: a full standard Claude page.
UNREADABLE_IMAGE_SIZE = (1568, 784)


@lru_cache(maxsize=4096)
def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) of image bytes, read from the header only."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data)) as image:
            width, height = image.size
            return int(width), int(height)
    except Exception:  # an unreadable image still costs something: price it as a full page
        return UNREADABLE_IMAGE_SIZE


@dataclasses.dataclass(frozen=True)
class CostModel:
    """Estimated tokens of messages for one reader (a ``Pricer``).

    Text goes through ``tokenizer`` when the caller has an exact one, else the
    per-script ``estimator``; images count the tokens they take in the reader's
    context (exact from the profile), which is what a budget limits.
    """

    profile: Profile
    estimator: TextEstimator = DEFAULT_ESTIMATOR
    tokenizer: Callable[[str], int] | None = None
    # id(message) -> (message, tokens): the ladder prices the same messages many
    # times; holding the message keeps its id from being reused.
    _memo: dict[int, tuple[Message, int]] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    # (width, height) -> tokens: screenshots come in a few sizes.
    _image_memo: dict[tuple[int, int], int] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    # The sums of whole histories (tokens; images' tokens), resumed for a history that
    # grew: a session prices its whole history several times a request.
    _sums: PrefixFolds[int] = dataclasses.field(default_factory=PrefixFolds, compare=False, repr=False)
    _image_sums: PrefixFolds[int] = dataclasses.field(default_factory=PrefixFolds, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.estimator is DEFAULT_ESTIMATOR:  # the default: the reader's provider family's rates
            object.__setattr__(self, "estimator", text_estimator(self.profile))

    @classmethod
    def for_model(
        cls, model: Profile | str, estimator: TextEstimator | None = None, tokenizer: Callable[[str], int] | None = None
    ) -> CostModel:
        return cls(resolve(model), estimator or DEFAULT_ESTIMATOR, tokenizer)

    def with_estimator(self, estimator: TextEstimator) -> CostModel:
        """This model with ``estimator``. The prices worked out carry over when only the
        overhead differs: no message's price depends on it."""
        same_rates = estimator.with_overhead(0) == self.estimator.with_overhead(0)
        return CostModel(
            self.profile, estimator, self.tokenizer, self._memo if same_rates else {}, self._image_memo, self._sums if same_rates else PrefixFolds(),
            self._image_sums,
        )

    def text(self, text: str) -> int:
        if not text:
            return 0
        return self.tokenizer(text) if self.tokenizer is not None else self.estimator.estimate(text)

    def image(self, block: Image) -> int:
        # A referenced image's size is unknown, and a text-only reader cannot take
        # images at all: both are priced as a full standard page until dropped.
        if block.data is None or not self.profile.vision:
            return UNKNOWN_IMAGE_TOKENS
        size = image_size(block.data)
        tokens = self._image_memo.get(size)
        if tokens is None:
            tokens = self._image_memo[size] = int(self.profile.context_tokens(*size))
        return tokens

    def block(self, block: Block) -> int:
        return block.tokens(self)

    def message(self, message: Message) -> int:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        tokens = message_tokens(message, self)
        self._memo[id(message)] = (message, tokens)
        return tokens

    def history(self, messages: Sequence[Message]) -> int:
        start, before = self._sums.resume(messages)
        total = (before or 0) + sum(self.message(m) for m in messages[start:])
        self._sums.keep(messages, total)
        return total

    def images(self, messages: Sequence[Message]) -> int:
        """Tokens of the images ``messages`` carry (those in tool results included)."""
        start, before = self._image_sums.resume(messages)
        total = (before or 0) + sum(self.image(image) for message in messages[start:] for image in message.images)
        self._image_sums.keep(messages, total)
        return total

    def breakdown(self, messages: Sequence[Message]) -> dict[Category, int]:
        """Tokens per category: system, user, assistant, thinking, tool calls, tool
        results, images (a tool result's images count as images)."""
        out = dict.fromkeys(CATEGORIES, 0)
        for message in messages:
            out["system" if message.role == "system" else "user" if message.role == "user" else "assistant"] += MESSAGE_OVERHEAD
            for block in message.content:
                # An image block is its own image (its category is "images", and tokens - images is 0).
                tokens, images = self.block(block), sum(self.image(i) for i in block.images())
                out["images"] += images
                out[block.category(message.role)] += tokens - images
        return out


#: Characters of the longest bar in ``token_bars``.
BAR_WIDTH = 40


def token_bars(rows: Iterable[tuple[str, int]], total: int) -> list[str]:
    """A line per (name, tokens): the count, its share of ``total`` and a bar."""
    total = total or 1
    return [
        f"{name:<13} {tokens:>10,} {tokens / total:>6.1%}  {'█' * round(BAR_WIDTH * tokens / total)}" for name, tokens in rows
    ]
