"""What a provider's counts teach about the local estimate: a scale on the text rates
and an overhead (the system prompt and tool schemas no message holds).

One count cannot tell the two apart: it is all overhead, as it always was. From the
second count on, the counts a conversation gathered are fitted as ``measured ≈ scale *
text + images + overhead`` (weighted least squares, newer counts weigh more, the scale
held towards 1 unless the counts spread far enough to show it). The overhead is then
set so the last count is matched exactly: the next request, which differs from the last
by a turn, is priced as well as before, and a compaction's target, far below the last
request, is priced with the scale rather than with an overhead that grew to absorb a
tokenizer's difference (43k -> 53k on a real Claude Code replay, until the target left
nothing for messages).

``benchmarks/test_bench_estimate.py`` measures it against additive calibration on the
real sessions' recorded counts. A per-block term was tried there too: it is collinear
with the text (both grow with every turn) and fitted negative on about half the agents,
so it is not learned.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import UsageError
from .._history.messages import Message
from .._providers.profile import Profile
from .._providers.text_tokens import TextEstimator
from .._types import public
from .cost import CostModel

#: Counts kept for the fit (the newest).
COUNTS_KEPT = 32
#: Each older count weighs this much less than the next one.
COUNT_DECAY = 0.9
#: How firmly the scale is held at 1: the weight of the prior, per count, on text
#: normalized to its mean (counts spread by less than about a tenth do not move it).
SCALE_PRIOR = 0.1
#: The scale learned stays within these bounds (tokenizers differ by far less).
SCALE_BOUNDS = (0.5, 2.0)
#: The scale moves in steps of this size: between steps every price worked out stays.
SCALE_STEP = 0.01


def measured_count(value: object) -> int:
    """``value`` as a provider's count of input tokens: a positive int, else ``UsageError``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UsageError(f"a measured count is a positive number of tokens, not {value!r}")
    return value


@public
@dataclasses.dataclass(frozen=True, kw_only=True)
class Calibration:
    """The estimate as a provider's counts corrected it.

    Attributes:
        base: the text rates before any count (their overhead is not used).
        scale: what the counts showed the rates to be off by (1.0 until they spread).
        overhead: tokens every request carries beyond its messages.
        counts: the newest ``COUNTS_KEPT`` counts as (text tokens at the base rates,
            measured tokens less the images' exact tokens), oldest first.
    """

    base: TextEstimator
    scale: float = 1.0
    overhead: int = 0
    counts: tuple[tuple[float, int], ...] = ()

    @functools.cached_property
    def estimator(self) -> TextEstimator:
        """The base rates times ``scale``, with ``overhead``."""
        scaled = self.base if self.scale == 1.0 else self.base.scaled(self.scale)
        return scaled.with_overhead(self.overhead)

    def learn(self, cost: CostModel, history: Sequence[Message], measured_tokens: int) -> Calibration:
        """This calibration after the provider counted ``measured_tokens`` for a request
        carrying ``history``, priced by ``cost`` (whose rates are this calibration's:
        what it priced as text is divided by ``scale`` back to the base rates). The
        overhead makes ``history`` cost exactly ``measured_tokens`` at the new rates."""
        measured = measured_count(measured_tokens)
        images, priced = cost.images(history), cost.history(history)
        text = (priced - images) / self.scale
        counts = (*self.counts, (text, measured - images))[-COUNTS_KEPT:]
        learned = dataclasses.replace(self, scale=fit_scale(counts), counts=counts)
        if learned.scale != self.scale:  # priced again at the new rates: the last count is matched exactly
            priced = cost.with_estimator(learned.estimator).history(history)
        return dataclasses.replace(learned, overhead=measured - priced)

    def to_record(self) -> dict[str, Any]:
        """What ``Workspace.save_calibration`` keeps (JSON), rates excepted."""
        return {"scale": self.scale, "overhead": self.overhead, "counts": [[round(t, 1), r] for t, r in self.counts]}

    @classmethod
    def from_record(cls, base: TextEstimator, record: Mapping[str, Any]) -> Calibration:
        """A calibration kept by ``to_record`` (or an older record holding only its
        overhead); what does not read as one is taken as no calibration at all."""
        overhead = record.get("overhead")
        if not isinstance(overhead, int) or isinstance(overhead, bool):
            return cls(base=base)
        scale = record.get("scale", 1.0)
        raw = record.get("counts", [])
        try:
            counts = tuple((float(t), int(r)) for t, r in raw)[-COUNTS_KEPT:]
            scale = float(scale)
        except (TypeError, ValueError):
            return cls(base=base, overhead=overhead)
        if not (SCALE_BOUNDS[0] <= scale <= SCALE_BOUNDS[1]) or not all(math.isfinite(t) for t, _ in counts):
            return cls(base=base, overhead=overhead)
        return cls(base=base, scale=scale, overhead=overhead, counts=counts)


def fit_scale(counts: Sequence[tuple[float, int]]) -> float:
    """The scale that fits ``rest ≈ scale * text + overhead`` over ``counts`` (see the
    module's note), in ``SCALE_STEP`` steps within ``SCALE_BOUNDS``; 1.0 for one count."""
    if len(counts) < 2:
        return 1.0
    import numpy as np  # here, not at the top: a command that only reads a workspace needs no fit

    data = np.array(counts, dtype=np.float64)  # float64[n, 2]: text, rest
    text, rest = data[:, 0], data[:, 1]
    unit = float(np.mean(text)) or 1.0
    weights = COUNT_DECAY ** np.arange(len(counts) - 1, -1, -1, dtype=np.float64)
    design = np.stack([text / unit, np.ones_like(text)], axis=1)  # float64[n, 2]
    weighted = design * weights[:, None]
    prior = SCALE_PRIOR
    normal = design.T @ weighted + np.diag([prior, 0.0])
    target = weighted.T @ rest + np.array([prior * unit, 0.0])
    try:
        scale = float(np.linalg.solve(normal, target)[0]) / unit
    except np.linalg.LinAlgError:
        return 1.0
    low, high = SCALE_BOUNDS
    return round(min(high, max(low, scale)) / SCALE_STEP) * SCALE_STEP if math.isfinite(scale) else 1.0


@public
def calibrate(
    history: Sequence[Message], profile: Profile | str, measured_tokens: int, estimator: TextEstimator | None = None
) -> TextEstimator:
    """The estimator with the overhead that makes ``history`` cost what the provider
    measured for a request carrying it (``usage.input_tokens`` plus cached input tokens
    of a response, or the count in an overflow error).

    One count is all overhead: a request carries the harness's system prompt and tool
    schemas, which no message holds. A conversation's later counts also show how far
    the rates are off: ``Calibration.learn`` fits both, and a ``Session`` uses it.
    """
    return calibrated(CostModel.for_model(profile, estimator), history, measured_tokens)


def calibrated(cost: CostModel, history: Sequence[Message], measured_tokens: int) -> TextEstimator:
    """``cost``'s estimator with the overhead that makes ``history`` cost ``measured_tokens``
    (``calibrate`` for a caller that keeps its prices in ``cost``)."""
    return cost.estimator.with_overhead(measured_count(measured_tokens) - cost.history(history))
