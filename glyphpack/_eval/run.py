"""``glyphpack eval``: the reading probe through the official SDK, with the user's key.

Each trial sends one probe page (rendered for the reader, so never resized) and its
prompt, scores the reply, and is written to the results JSON before the next one, so a
run that stops resumes where it was. Rate limits are retried with exponential backoff.
The cost is estimated and shown before anything is spent.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._errors import GlyphpackError, UsageError
from .._files import atomic_write
from .._history.messages import Image, Message, Text
from .._providers.reading import ReadingEvidence, ReadingProfile, local_profiles, local_profiles_path, profile_to_json
from .._providers.resolve import normalize_model, reading_profile, resolve
from .._providers.text_tokens import estimate_text_tokens
from .._render.render import plan as plan_pages
from .._render.render import render
from .._render.shapes import SHAPES, get_shape
from .._types import APIS, Api, check_kind
from .._wire import merge_extra, provider_api
from .probes import KINDS, Probe, mean_interval, probe_set, score, wilson

FORMAT = "glyphpack-eval"
#: Shapes probed when none are named: dense to legible.
DEFAULT_SHAPES = ("5x8", "6x13", "8x13-loose", "9x15-loose", "10x20")
#: Output tokens a reply is budgeted at (the estimate and ``max_tokens``).
REPLY_TOKENS = 400
RETRIES = 6
BACKOFF_SECONDS = 2.0
#: A shape is applied as read "exactly" from this lower 95% bound of exact lines, and
#: as keeping the gist from this lower bound of questions answered.
EXACT_BOUND = 0.9
GIST_BOUND = 0.8


@dataclasses.dataclass(frozen=True)
class EvalPlan:
    model: str
    api: Api
    shapes: tuple[str, ...]
    per_shape: int
    seed: int = 0

    def __post_init__(self) -> None:
        check_kind(self.api, APIS, "api")
        unknown = [s for s in self.shapes if s not in SHAPES]
        if unknown:
            raise UsageError(f"unknown shape(s) {', '.join(unknown)}; shapes: {', '.join(SHAPES)}")
        if not isinstance(self.per_shape, int) or self.per_shape < 1:
            raise UsageError(f"--per-shape must be a positive number of probes, not {self.per_shape!r}")
        if not resolve(self.model).vision:
            raise UsageError(f"{self.model} reads no images: there is nothing to evaluate")

    def probes(self) -> list[Probe]:
        return probe_set(self.shapes, self.per_shape, self.seed)


def _page(probe: Probe, model: str) -> Any:
    pages = render(probe.text, model=model, shape=probe.shape, layout="lines")
    if len(pages) != 1:
        raise GlyphpackError(f"probe {probe.id} does not fit one page in {probe.shape}")
    return pages[0]


def drawn_labels(probe: Probe, page: Any) -> set[str]:
    """The asked lines the shape draws as they are: every character has a glyph of its
    own in the page's font (a font without CJK draws a replacement: those lines are not
    scored for that shape). Asked of the font, not of the page read back: the reader
    reads look-alike glyphs (Cyrillic р and Latin p) as one character, and a line of
    look-alikes is drawn all the same."""
    atlas = get_shape(page.shape).atlas
    return {label for label in probe.asked if all(atlas.has(ord(c)) for c in f"{label} {probe.truth(label)}")}


def estimate(plan: EvalPlan) -> dict[str, int]:
    """Trials and tokens the run will bill (input: the page and the prompt)."""
    input_tokens = 0
    probes = plan.probes()
    for probe in probes:  # planned, not drawn: the run draws each page when it sends it
        report = plan_pages(probe.text, model=plan.model, shape=probe.shape, layout="lines")
        input_tokens += (report.image_tokens or 0) + estimate_text_tokens(probe.prompt())
    return {"trials": len(probes), "input_tokens": input_tokens, "output_tokens": len(probes) * REPLY_TOKENS}


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None) or getattr(error, "code", None)
    return status if isinstance(status, int) else None


def call_model(client: Any, api: Api, request: dict[str, Any]) -> Any:
    """``request`` through ``client``, its reply capped at ``REPLY_TOKENS``."""
    built = provider_api(api)
    return built.send(client, merge_extra(request, built.reply_limit(REPLY_TOKENS)))


def _with_retries(call: Callable[[], Any], sleep: Callable[[float], None]) -> Any:
    for attempt in range(RETRIES + 1):
        try:
            return call()
        except Exception as error:
            if _status(error) != 429 or attempt == RETRIES:
                raise
            sleep(BACKOFF_SECONDS * 2**attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def load_results(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        raise GlyphpackError(f"{path} is not readable eval results ({type(exc).__name__}: {str(exc)[:120]}); move it away to start afresh") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("trials"), list):
        raise GlyphpackError(f"{path} is not glyphpack eval results (no format {FORMAT!r})")
    problem = _results_problem(data)
    if problem:
        raise GlyphpackError(f"{path} is damaged: {problem}; move it away to start afresh")
    return data


def _results_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with a results document's fields (None: nothing), checked before
    any of it is used, so a damaged file is named, never an internal error."""

    def kind(value: object, want: type | tuple[type, ...]) -> bool:  # bool is an int, but not a count
        return isinstance(value, want) and not isinstance(value, bool)

    def number(value: object) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    for key, want in (("model", str), ("api", str), ("seed", int)):
        if not kind(data.get(key), want):
            return f"{key!r} must be a {want.__name__}, not {data.get(key)!r}"
    if data["api"] not in APIS:
        return f"'api' must be one of {', '.join(APIS)}, not {data['api']!r}"
    if "started" in data and not kind(data["started"], str):
        return f"'started' must be a timestamp string, not {data['started']!r}"
    for index, trial in enumerate(data["trials"]):
        where = f"trial {index}"
        if not isinstance(trial, dict):
            return f"{where} must be an object, not {type(trial).__name__}"
        if not kind(trial.get("id"), str) or trial.get("shape") not in SHAPES:
            return f"{where}: needs a string 'id' and a 'shape' glyphpack has, got {trial.get('id')!r} and {trial.get('shape')!r}"
        for key in ("page_tokens", "chars"):
            if key in trial and not number(trial[key]):
                return f"{where}: {key!r} must be a finite number, not {trial[key]!r}"
        lines, gist = trial.get("lines"), trial.get("gist")
        if not isinstance(lines, list) or not isinstance(gist, list) or not all(isinstance(g, bool) for g in gist):
            return f"{where}: needs a list of 'lines' and a list of true/false 'gist' answers"
        for line in lines:
            if not isinstance(line, dict) or line.get("kind") not in KINDS or not isinstance(line.get("exact"), bool) or not number(line.get("cer")):
                return f"{where}: every line needs a 'kind' ({', '.join(KINDS)}), 'exact' true/false and a finite 'cer', got {str(line)[:80]}"
    return None


def run_eval(
    plan: EvalPlan,
    client: Any,
    results_path: Path,
    *,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run (or resume) the probe; returns the results, which are also on disk after
    every trial. Results of another model or seed in ``results_path`` are refused."""
    data = load_results(results_path)
    header: dict[str, Any] = {"format": FORMAT, "model": plan.model, "api": plan.api, "seed": plan.seed}
    if data is None:
        data = header | {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "trials": []}
    elif any(data.get(k) != v for k, v in header.items() if k != "format"):
        raise UsageError(f"{results_path} holds results for {data.get('model')} ({data.get('api')}, seed {data.get('seed')}): use another --out")
    done = {t["id"] for t in data["trials"]}
    probes = plan.probes()
    build = provider_api(plan.api)
    profile = resolve(plan.model)
    for number, probe in enumerate(probes, 1):
        if probe.id in done:
            continue
        page = _page(probe, plan.model)
        view = (Message("user", (Image("image/png", page.png), Text(probe.prompt()))),)
        request = build.build(plan.model, view, 0, profile)
        try:
            response = _with_retries(functools.partial(call_model, client, plan.api, request), sleep)
            reply = build.parse(response).message.text
            error = None
        except GlyphpackError as exc:  # a reply the adapter cannot read: scored as nothing read
            reply, error = "", str(exc)
        scored = score(probe, reply)
        drawn = drawn_labels(probe, page)
        scored["lines"] = [line for line in scored["lines"] if line["label"] in drawn]
        chars = sum(len(text) + 4 for _, _, text in probe.lines)
        data["trials"].append({"id": probe.id, "shape": probe.shape, "page_tokens": int(page.tokens), "chars": chars,
                               "reply": reply, "error": error, **scored})
        atomic_write(results_path, json.dumps(data, indent=1, ensure_ascii=False).encode("utf-8"))
        if progress is not None:
            progress(number, len(probes))
    return data


def summary(data: dict[str, Any]) -> list[dict[str, Any]]:
    """A row per shape: characters per image token, exact lines (rate and interval, per
    kind), mean CER (interval), gist (rate and interval), trials."""
    rows = []
    for shape in dict.fromkeys(t["shape"] for t in data["trials"]):
        trials = [t for t in data["trials"] if t["shape"] == shape]
        lines = [line for t in trials for line in t["lines"]]
        gist = [g for t in trials for g in t["gist"]]
        exact = sum(line["exact"] for line in lines)
        cer_mean, cer_low, cer_high = mean_interval([min(1.0, line["cer"]) for line in lines])
        rows.append({
            "shape": shape,
            "chars_per_token": density(shape, data["model"]),
            "trials": len(trials),
            "exact": exact / max(1, len(lines)), "exact_ci": wilson(exact, len(lines)),
            "exact_by_kind": {k: _rate([line["exact"] for line in lines if line["kind"] == k]) for k in KINDS},
            "cer": cer_mean, "cer_ci": (cer_low, cer_high),
            "gist": sum(gist) / max(1, len(gist)), "gist_ci": wilson(sum(gist), len(gist)),
        })
    return rows


def _rate(values: Sequence[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def density(shape: str, model: str) -> float:
    """Characters per image token of a full page of ``shape`` for ``model``."""
    return resolve(model).page_density(SHAPES[shape])


def markdown(data: dict[str, Any]) -> str:
    def percent(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.0%}"

    lines = [
        f"glyphpack eval of {data['model']} through {data['api']} (seed {data['seed']}, started {data.get('started', '?')})",
        "",
        "| shape | chars per image token | trials | exact lines [95% CI] | " + " | ".join(f"exact {k}" for k in KINDS)
        + " | CER [95% CI] | gist [95% CI] |",
        "|---|---|---|---|" + "---|" * len(KINDS) + "---|---|",
    ]
    for row in summary(data):
        low, high = row["exact_ci"]
        cer_low, cer_high = row["cer_ci"]
        gist_low, gist_high = row["gist_ci"]
        lines.append(
            f"| {row['shape']} | {row['chars_per_token']:.1f} | {row['trials']} | {row['exact']:.0%} [{low:.0%}, {high:.0%}] | "
            + " | ".join(percent(row["exact_by_kind"][k]) for k in KINDS)
            + f" | {row['cer']:.3f} [{cer_low:.3f}, {cer_high:.3f}] | {row['gist']:.0%} [{gist_low:.0%}, {gist_high:.0%}] |"
        )
    return "\n".join(lines) + "\n"


def plot(data: dict[str, Any]) -> bytes:
    """Accuracy (exact lines, gist) against characters per image token, a point per shape."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary(data)
    figure, ax = plt.subplots(figsize=(6.4, 4.2))
    for key, label, marker in (("exact", "exact lines", "o"), ("gist", "gist questions", "s")):
        xs = [r["chars_per_token"] for r in rows]
        ys = [r[key] for r in rows]
        # max(0, ...): at a rate of 0 or 1 the interval's rounding can land a hair inside it
        errors = [[max(0.0, r[key] - r[f"{key}_ci"][0]) for r in rows], [max(0.0, r[f"{key}_ci"][1] - r[key]) for r in rows]]
        ax.errorbar(xs, ys, yerr=errors, marker=marker, linestyle="", capsize=3, label=label)
    for r in rows:
        ax.annotate(r["shape"], (r["chars_per_token"], r["exact"]), textcoords="offset points", xytext=(4, -10), fontsize=8)
    ax.set_xlabel("characters per image token (denser to the right)")
    ax.set_ylabel("share read correctly")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"{data['model']}: reading probe pages")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()


def apply(results_path: Path) -> tuple[Path, ReadingProfile, list[str]]:
    """Write the reading profile the results support for their model, and say where it
    departs from the published one: exact, the densest shape whose exact lines' lower
    95% bound reaches ``EXACT_BOUND``; gist, the densest whose gist bound reaches
    ``GIST_BOUND``, never sparser than exact. Where no measured shape clears the exact
    bar, the published shape is kept, and a remark says so, with the measurement when it
    contradicts it. Returns (the file, the profile, the remarks)."""
    data = load_results(results_path)
    if data is None:
        raise GlyphpackError(f"{results_path}: no such results file")
    rows = sorted(summary(data), key=lambda r: r["chars_per_token"], reverse=True)
    measured = {row["shape"]: row for row in rows}
    published = reading_profile(data["model"], measured=False)
    source = f"glyphpack eval {results_path.name} ({data.get('started', '?')})"
    remarks: list[str] = []

    def note(row: dict[str, Any], key: str) -> str:
        return f"{row[key]:.0%} of {row['trials']} probes ({key}), lower 95% bound {row[f'{key}_ci'][0]:.0%}"

    def densest(key: str, bound: float) -> ReadingEvidence | None:
        for row in rows:
            if row[f"{key}_ci"][0] >= bound:
                return ReadingEvidence(row["shape"], source, note(row, key), data.get("started", "?")[:10])
        return None

    exact = densest("exact", EXACT_BOUND)
    if exact is None:
        exact = published.exact
        contradicted = measured.get(exact.shape)
        remarks.append(
            f"no measured shape was read exactly often enough (a lower bound of {EXACT_BOUND:.0%}); exact stays the published {exact.shape}"
            + (f", which this measurement contradicts: {note(contradicted, 'exact')}" if contradicted else " (not measured here)")
        )
    gist = densest("gist", GIST_BOUND) or exact
    density = {row["shape"]: row["chars_per_token"] for row in rows}
    if density.get(gist.shape, 0.0) < density.get(exact.shape, 0.0):
        remarks.append(f"gist {gist.shape} would be sparser than exact {exact.shape}: gist is {exact.shape} too")
        gist = exact
    profile = ReadingProfile(f"measured: {data['model']}", exact, gist)
    path = local_profiles_path()
    existing = {model: profile_to_json(p) for model, p in local_profiles(strict=True).items()}  # a damaged file is named
    existing[normalize_model(data["model"])] = profile_to_json(profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(existing, indent=1).encode("utf-8"))
    return path, profile, remarks


#: The key sent to a local server (``--base-url``) when none is set: vLLM, Ollama and LM
#: Studio take any.
LOCAL_KEY = "no-key"


def make_client(api: Api, base_url: str | None = None) -> Any:
    """The official SDK's client (it reads the key from its usual environment variable,
    checked here first so a run never starts without one; a local server given by
    ``base_url`` needs none)."""
    built = provider_api(api)
    if not any(os.environ.get(name) for name in built.key_variables):
        if base_url is None:
            raise UsageError(f"glyphpack eval --api {api} needs your key in {' or '.join(built.key_variables)}")
        return built.client(base_url, key=LOCAL_KEY)
    return built.client(base_url)


def shapes_arg(value: str | None) -> tuple[str, ...]:
    return tuple(s.strip() for s in value.split(",") if s.strip()) if value else DEFAULT_SHAPES
