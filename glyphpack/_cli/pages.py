"""The commands that draw and read pages: render, read, profiles, legibility, warm, fonts, eval."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import cast

from .._errors import GlyphpackError, UsageError
from .._types import APIS, LAYOUTS, Fidelity
from .common import SHAPE_NAMES, Command, _output_dir, _output_file, _page_size, _progress_bar, _read_input, _write, table


def _show(char: str) -> str:
    """A character as it can be printed: controls and markers by name."""
    if char == "\n":
        return "(newline marker)"
    if ord(char) > 0x10FFFF or not char.isprintable():
        return "(marker)" if ord(char) > 0x10FFFF else repr(char)
    return char


def _compression(ratio: float | None) -> str:
    if not ratio:
        return "image area not billed on this route"
    return f"{ratio:.2f}x fewer tokens" if ratio >= 1 else f"{1 / ratio:.2f}x more tokens than the text"


def cmd_render(args: argparse.Namespace) -> int:
    from .._render.render import _prepare, _render_prepared, _report

    out, sheet = _output_dir(args.out), _output_file(args.contact_sheet)
    text = _read_input(args.file)
    # Planned once: priced first, then drawn as planned.
    prepared = _prepare(text, args.shape, args.layout, args.page_size, args.model, args.max_pages, fidelity=cast("Fidelity | None", args.fidelity))
    if args.model is not None:
        # Said before anything is drawn or written: pages that cost more than the text.
        planned = _report(prepared, None)
        if planned.image_tokens is not None and planned.image_tokens > planned.text_tokens > 0:
            print(
                f"warning: these pages cost {planned.image_tokens:,} image tokens, {planned.image_tokens / planned.text_tokens:.2f}x "
                f"the ~{planned.text_tokens:,} tokens the same text costs as text ({planned.shape}, {planned.layout} layout); "
                f"the flow layout or a denser shape the reader reads costs less",
                file=sys.stderr,
            )
    bar, update = _progress_bar("rendering")
    try:
        pages = _render_prepared(prepared, args.max_pages, update)
    finally:
        bar.close()
    report = pages.report
    written = []
    if args.contact_sheet:
        from .._render.sheet import contact_sheet

        assert sheet is not None
        _write(sheet, contact_sheet(pages))
    if out is not None:
        for page in pages:
            path = out / f"page-{page.index + 1:04d}.png"
            _write(path, page.png)
            written.append(str(path))
    if args.json:
        print(json.dumps(report.as_dict() | {"files": written}, indent=2))
        return 0
    size = f"{report.page_width}x{report.page_height}" if report.pages else "-"
    rows = []
    if report.model is not None:
        rows.append(("model", f"{report.model} ({report.profile})"))
    rows += [
        ("shape", f"{report.shape} ({report.layout}): {report.shape_reason}"),
        ("pages", f"{report.pages}"),
        ("page size", f"{size} px (last page may be shorter)"),
        ("characters", f"{report.source_chars:,} in, {report.chars:,} drawn"),
        ("cells used", f"{report.cells_used:,} of {report.cells_total:,} ({report.cells_used_fraction:.1%})"),
        ("PNG bytes", f"{report.png_bytes:,}"),
        ("folded", f"{report.folded:,}"),
        ("replaced", f"{report.replaced:,}"),
        ("dropped", f"{report.dropped:,}"),
        ("controls shown", f"{report.controls:,}"),
        ("ANSI stripped", f"{report.ansi_sequences:,} sequences"),
    ]
    if report.model is not None:
        rows += [
            ("image tokens", f"{report.image_tokens:,} billed for the pages"),
            ("text tokens", f"~{report.text_tokens:,} estimated for the same text sent as text"),
            ("compression", _compression(report.compression)),
            ("requests", f"{report.requests} (images per request limit)"),
        ]
    else:
        rows.append(("text tokens", f"~{report.text_tokens:,} estimated (pass --model for image cost)"))
    if args.contact_sheet:
        rows.append(("contact sheet", args.contact_sheet))
    if written:
        rows.append(("written", f"{written[0]} .. {written[-1]}" if len(written) > 1 else written[0]))
    print(table(rows))
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    from .._errors import PageError
    from .._render.reader import read_pages

    pngs = []
    for name in args.pages:
        try:
            pngs.append(Path(name).read_bytes())
        except OSError as exc:
            raise GlyphpackError(f"cannot read {name}: {exc.strerror}") from None
        try:
            read_pages([pngs[-1]], args.shape, args.layout)  # each file alone first: its error names it
        except PageError as exc:
            raise PageError(f"{name}: {exc}") from None
    sys.stdout.write(read_pages(pngs, args.shape, args.layout) + "\n")
    return 0


def cmd_legibility(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .._render.legibility import FILTERS, SWEEP_FACTORS, plot_sweep, sweep, unreadable_below
    from .._render.shapes import SHAPES

    out = _output_file(args.out)
    shapes = [SHAPES[args.shape]] if args.shape else list(SHAPES.values())
    with tqdm(total=len(shapes) * len(FILTERS) * len(SWEEP_FACTORS), unit="page", desc="measuring",
              delay=0.5, file=sys.stderr, leave=False, disable=None) as bar:
        records = sweep(shapes, progress=bar.update)
    if out is not None:
        _write(out, plot_sweep(records))
    if args.json:
        print(json.dumps(records, indent=2))
        return 0
    factors = sorted({r["factor"] for r in records}, reverse=True)
    print("| shape | filter | " + " | ".join(f"{f:g}" for f in factors) + " |")
    print("|---|---|" + "---|" * len(factors))
    for shape in shapes:
        for filter_name in FILTERS:
            scores = {r["factor"]: r["legibility"] for r in records if r["shape"] == shape.name and r["filter"] == filter_name}
            print(f"| {shape.name} | {filter_name} | " + " | ".join(f"{scores[f]:.2f}" for f in factors) + " |")
    print()
    for shape in shapes:
        limit = unreadable_below(records, shape.name)
        verdict = (
            f"unreadable (under 50% of glyphs with every filter) from {limit:g}x, the largest such factor measured"
            if limit
            else "readable at every factor measured"
        )
        print(f"{shape.name}: {verdict}")
    if out is not None:
        print(f"plot written to {args.out}")
    return 0


def cmd_warm(args: argparse.Namespace) -> int:
    """Build every shipped font's atlas and compile the render kernels into the caches
    now, so that a process's first render only loads them (a container image's build
    step, say)."""
    import time

    from .._files import cache_dir
    from .._render.fonts import load_atlas
    from .._render.kernels import kernel_cache_dir
    from .._render.render import render
    from .._render.shapes import SHAPES

    started = time.perf_counter()
    fonts = sorted({shape.font for shape in SHAPES.values()})
    for font in fonts:
        load_atlas(font)
    for shape in SHAPES.values():
        shape.atlas  # noqa: B018 - the merged atlases (a font and Unifont's glyphs) too
    atlases = time.perf_counter() - started
    started = time.perf_counter()
    # Lines and flow: the page kernel lays out, counts and draws; one kernel maps glyphs.
    render("warm\tup\x07 caf\u00e9\n" * 50, shape="5x8", layout="lines")
    render("warm up " * 50, shape="5x8")
    kernels = time.perf_counter() - started
    print(f"{len(fonts)} font atlases in {atlases:.2f} s, in {cache_dir()}")
    print(f"render kernels in {kernels:.2f} s, in {kernel_cache_dir()}")
    return 0


def cmd_fonts(args: argparse.Namespace) -> int:
    if args.confusables:
        from .._render.legibility import confusable_pairs

        pairs = confusable_pairs(args.confusables, max_distance=2)
        for a, b, distance in pairs:
            kind = "identical" if distance == 0 else f"{distance} px apart"
            print(f"U+{ord(a):04X} {_show(a)}  U+{ord(b):04X} {_show(b)}  {kind}")
        counts = [sum(1 for p in pairs if p[2] == d) for d in range(3)]
        print(f"{args.confusables}: {counts[0]} identical pairs, {counts[1]} pairs 1 px apart, {counts[2]} pairs 2 px apart")
        return 0
    from .._render.fonts import COVERAGE_BLOCKS, coverage
    from .._render.shapes import SHAPES

    lines = [
        f"{'shape':<11} {'glyph':>6} {'cell':>6} {'glyphs':>7} {'page':>10} {'cells/page':>10} "
        + " ".join(f"{name:>8}" for name in COVERAGE_BLOCKS)
    ]
    for shape in SHAPES.values():
        atlas = shape.atlas  # the font, and Unifont's glyphs where the cell holds them
        shares = coverage(atlas).values()
        lines.append(
            f"{shape.name:<11} {atlas.glyph_width:>3}x{atlas.glyph_height:<2} {shape.advance:>3}x{shape.pitch:<2} "
            f"{len(atlas):>7} {shape.page_width:>5}x{shape.page_height(shape.max_rows):<4} {shape.cells_per_page:>10,} "
            + " ".join(f"{c:>8.0%}" for c in shares)
        )
    lines.append(
        "(coverage: the share of each block the shape draws, from its font or, where its cells hold 8x16, from "
        "Unifont; the rest is folded or replaced)"
    )
    print("\n".join(lines))
    return 0


def cmd_profiles(args: argparse.Namespace) -> int:
    from .._providers.reading import READING_EXAMPLES
    from .._providers.resolve import default_shapes, profile_rows
    from .._render.shapes import SHAPES

    if args.model or (args.shape is None and not args.json):
        # What each model gets by default: render --model, compact and Session draw its exact shape.
        models = args.model or list(READING_EXAMPLES.values())
        print(f"{'model':<28} {'default (exact)':<16} {'chars/token':>11}   {'with recall (gist)':<18} {'chars/token':>11}  evidence")
        for model in models:
            found = default_shapes(model, SHAPES)
            exact, gist = (f"{v:.1f}" if v else "free" for v in (found.exact_chars_per_token, found.gist_chars_per_token))
            print(f"{model:<28} {found.exact:<16} {exact:>11}   {found.gist:<18} {gist:>11}  {found.source}")
        if args.model:
            return 0
        print("\nEvery route, the densest shape (5x8; --shape NAME or all for others):")
    shape = args.shape or "5x8"
    every = args.json or shape == "all"
    shown = profile_rows((name, cells) for name, cells in SHAPES.items() if every or name == shape)
    if args.json:
        print(json.dumps([row.as_dict() for row in shown], indent=2))
        return 0
    print(f"{'profile':<36} {'shape':<11} {'page':>10} {'chars/page':>10} {'tokens':>6} {'chars/token':>11}")
    for row in shown:
        cpt = f"{row.chars_per_token:.1f}" if row.chars_per_token else "free"
        print(
            f"{row.profile:<36} {row.shape:<11} {row.page_width:>5}x{row.page_height:<4} "
            f"{row.chars_per_page:>10,} {row.tokens_per_page:>6,} {cpt:>11}"
        )
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """The reading probe with the user's key (``--yes`` to spend), or ``--apply``."""
    from .._eval import run
    from .._wire import native_api

    if args.apply:
        path, profile, remarks = run.apply(Path(args.apply))
        print(f"wrote {path}: {args.apply} -> exact {profile.exact.shape}, gist {profile.gist.shape} "
              f"(render and the ladder now use them for that model)")
        for remark in remarks:
            print(f"glyphpack: note: {remark}", file=sys.stderr)
        return 0
    if not args.model:
        raise UsageError("glyphpack eval needs --model ID (or --apply RESULTS.json)")
    provider = run.resolve(args.model).reader.provider
    # --api is checked by argparse; without it, the first registered API of the model's provider.
    api = args.api or native_api(provider).name
    plan = run.EvalPlan(args.model, api, run.shapes_arg(args.shapes), args.per_shape, args.seed)
    out = _output_dir(args.out)
    assert out is not None
    cost = run.estimate(plan)
    print(f"{cost['trials']} trials ({len(plan.shapes)} shapes x {plan.per_shape}) of {args.model} through {api}: "
          f"about {cost['input_tokens']:,} input tokens (pages and prompts) and at most {cost['output_tokens']:,} output tokens")
    results = out / "results.json"
    done = run.load_results(results)
    if done is not None:
        print(f"{results} holds {len(done['trials'])} finished trials: they are kept and not sent again")
    if not args.yes:
        print("nothing was sent; add --yes to run it with your key")
        return 0
    client = run.make_client(api, args.base_url)
    out.mkdir(exist_ok=True)
    bar, update = _progress_bar("probing")
    with bar:
        try:
            data = run.run_eval(plan, client, results, progress=update)
        except Exception as exc:
            if type(exc).__name__ not in ("APIConnectionError", "APITimeoutError", "ConnectError"):
                raise
            # The SDKs' own message is "Connection error."; say where and what to check.
            where = args.base_url or f"the {api} API's default endpoint"
            raise UsageError(
                f"cannot reach {where} ({type(exc).__name__}: {exc}): check that the server is running and the URL"
                + (" (an OpenAI-compatible server usually ends in /v1)" if args.base_url else ", and the network")
                + f"; finished trials are kept in {results}"
            ) from None
    report = run.markdown(data)
    _write(out / "report.md", report.encode("utf-8"))
    written = [results, out / "report.md"]
    try:
        _write(out / "plot.png", run.plot(data))
        written.append(out / "plot.png")
    except ImportError:
        print("(no plot: matplotlib is not installed)", file=sys.stderr)
    print(report)
    print("wrote " + ", ".join(map(str, written)) + f"; apply it with: glyphpack eval --apply {results}")
    return 0


def _render_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a UTF-8 text file, or - for standard input")
    p.add_argument("--model", help="size pages for this model id and print what they cost (e.g. claude-sonnet-4-5)")
    p.add_argument("--shape", choices=sorted(SHAPE_NAMES), help="glyph shape (default: chosen from the text)")
    p.add_argument("--layout", choices=LAYOUTS, default="flow")
    p.add_argument("--fidelity", choices=("exact", "gist", "dense"),
                   help="with --model and no --shape: the densest shape the model is known to read exactly (the "
                        "default), or for the gist; dense: the densest shape whatever the model reads")
    p.add_argument("--page-size", type=_page_size, metavar="WxH", help="page size limit in px")
    p.add_argument("--max-pages", type=int, default=5000)
    p.add_argument("--out", metavar="DIR", help="write page-0001.png ... here")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--contact-sheet", metavar="FILE.png", help="also write every page as a labelled thumbnail here")


def _read_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("pages", nargs="+", metavar="PAGE.png")
    p.add_argument("--shape", choices=sorted(SHAPE_NAMES), default=None, help="default: the shape the page says it was drawn in")
    p.add_argument("--layout", choices=LAYOUTS, default=None, help="default: the layout the page says, else flow")


def _profiles_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shape", choices=sorted(SHAPE_NAMES) + ["all"], help="one shape's rows on every route, or all (default: each model's default, then 5x8)")
    p.add_argument("--model", action="append", metavar="ID", help="what this model gets by default (its exact and gist shapes); repeatable")
    p.add_argument("--json", action="store_true", help="every profile and shape, as JSON")


def _legibility_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shape", choices=sorted(SHAPE_NAMES), help="one shape (default: every shape)")
    p.add_argument("--out", metavar="FILE.png", help="write the plot here")
    p.add_argument("--json", action="store_true", help="print every measurement as JSON")


def _eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="the model id, as its SDK takes it")
    p.add_argument("--api", choices=APIS, help="which API (default: from the model's provider)")
    p.add_argument("--base-url", help="an OpenAI-compatible (or Anthropic-compatible) endpoint")
    p.add_argument("--shapes", help="comma-separated shapes (default: 5x8,6x13,8x13-loose,9x15-loose,10x20)")
    p.add_argument("--per-shape", type=int, default=10, help="probe pages per shape (default 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="eval", metavar="DIR", help="results.json, report.md and plot.png go here (default: eval)")
    p.add_argument("--yes", action="store_true", help="spend: without it only the estimate is printed")
    p.add_argument("--apply", metavar="RESULTS.json", help="write the reading profile these results support")


def _fonts_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--confusables", metavar="SHAPE", choices=sorted(SHAPE_NAMES),
                   help="list glyph pairs of SHAPE's font that are identical or 1-2 px apart")


COMMANDS = (
    Command("render", "render a text file to PNG pages and report what it cost", _render_arguments, cmd_render),
    Command("read", "decode page PNGs back to text", _read_arguments, cmd_read),
    Command("profiles", "page size and characters per billed token per provider profile", _profiles_arguments, cmd_profiles),
    Command("legibility", "measure legibility under downscaling; table and plot", _legibility_arguments, cmd_legibility),
    Command("eval", "measure how well a model reads pages, with your own key (prints the cost first)", _eval_arguments, cmd_eval),
    Command("warm", "build the font atlases and compile the render kernels into the caches now", lambda p: None, cmd_warm),
    Command("fonts", "list shapes and their fonts' coverage", _fonts_arguments, cmd_fonts),
)
