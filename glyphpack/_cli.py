"""The ``glyphpack`` command line: a thin shell that parses, calls the library, formats.

Each command imports what it uses when it runs, so the history commands (``tree``,
``branch``, ``fork``, ``export``, ``context``) never load numba.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ._errors import GlyphpackError, StoreError, UsageError
from ._types import APIS, LAYOUTS, Fidelity

if TYPE_CHECKING:
    from ._compaction.results import Compaction
    from ._history.importers.base import ImportedSession
    from ._history.messages import Message
    from ._history.tree import SessionTree

#: Shape names, for argument choices without loading any font (a test checks them
#: against ``SHAPES``).
WORKSPACE_HELP = "the workspace: a folder, or a PostgreSQL URL (postgresql://user:password@host/db) for a fleet"
SHAPE_NAMES = ("5x8", "6x13", "8x13", "8x13-loose", "7x14", "9x15", "9x15-loose", "9x18", "10x20", "8x13-tall", "unifont")
#: Session formats, for argument choices (a test checks them against the registry).
FORMAT_NAMES = (
    "claude-code", "pi", "codex", "openhands", "swe-agent", "mini-swe-agent", "openhands-events", "copilot-cli", "kimi-cli", "gemini-cli", "opencode",
    "cline", "goose", "crush", "aider",
    *APIS, "glyphpack",
)


def _page_size(value: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in value.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"page size must look like 1568x784, not {value!r}") from None
    return width, height


def _output_file(name: str | None) -> Path | None:
    """An output file's path, checked before any work: its folder exists, and it is
    not a folder itself."""
    if name is None:
        return None
    path = Path(name)
    if path.is_dir():
        raise GlyphpackError(f"cannot write {path}: it is a folder; name a file")
    if not path.parent.is_dir():
        raise GlyphpackError(f"cannot write {path}: the folder {path.parent} does not exist")
    return path


def _output_dir(name: str | None) -> Path | None:
    """An output folder's path, checked before any work: a folder, or a new one in a
    folder that exists (created when there is something to write)."""
    if name is None:
        return None
    path = Path(name)
    if path.exists() and not path.is_dir():
        raise GlyphpackError(f"cannot write into {path}: it exists and is not a folder")
    if not path.parent.is_dir():
        raise GlyphpackError(f"cannot create {path}: the folder {path.parent} does not exist")
    return path


def _write(path: Path, data: bytes) -> None:
    """Atomically (a temporary file renamed into place): a failure never leaves a
    truncated output."""
    from ._files import atomic_write

    path.parent.mkdir(exist_ok=True)
    atomic_write(path, data, durable=False)


def _read_input(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise GlyphpackError(f"cannot read {name}: {exc.strerror}") from None


def _show(char: str) -> str:
    """A character as it can be printed: controls and markers by name."""
    if char == "\n":
        return "(newline marker)"
    if ord(char) > 0x10FFFF or not char.isprintable():
        return "(marker)" if ord(char) > 0x10FFFF else repr(char)
    return char


def table(rows: list[tuple[str, str]]) -> str:
    """Two aligned columns."""
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _progress_bar(description: str) -> tuple[Any, Callable[[int, int], None]]:
    """A tqdm bar on stderr that appears only if the work takes more than half a second."""
    from tqdm import tqdm

    bar = tqdm(total=0, unit="page", desc=description, delay=0.5, file=sys.stderr, leave=False, disable=None)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    return bar, update


def _compression(ratio: float | None) -> str:
    if not ratio:
        return "image area not billed on this route"
    return f"{ratio:.2f}x fewer tokens" if ratio >= 1 else f"{1 / ratio:.2f}x more tokens than the text"


def cmd_render(args: argparse.Namespace) -> int:
    from ._render.render import _prepare, _render_prepared, _report

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
        from ._render.sheet import contact_sheet

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
    from ._errors import PageError
    from ._render.reader import read_pages

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

    from ._render.legibility import FILTERS, SWEEP_FACTORS, plot_sweep, sweep, unreadable_below
    from ._render.shapes import SHAPES

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

    from ._files import cache_dir
    from ._render.fonts import load_atlas
    from ._render.kernels import kernel_cache_dir
    from ._render.render import render
    from ._render.shapes import SHAPES

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
        from ._render.legibility import confusable_pairs

        pairs = confusable_pairs(args.confusables, max_distance=2)
        for a, b, distance in pairs:
            kind = "identical" if distance == 0 else f"{distance} px apart"
            print(f"U+{ord(a):04X} {_show(a)}  U+{ord(b):04X} {_show(b)}  {kind}")
        counts = [sum(1 for p in pairs if p[2] == d) for d in range(3)]
        print(f"{args.confusables}: {counts[0]} identical pairs, {counts[1]} pairs 1 px apart, {counts[2]} pairs 2 px apart")
        return 0
    from ._render.fonts import COVERAGE_BLOCKS, coverage
    from ._render.shapes import SHAPES

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
    from ._providers.reading import READING_EXAMPLES
    from ._providers.resolve import default_shapes, profile_rows
    from ._render.shapes import SHAPES

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


def _tree(path: str, *, write: bool) -> SessionTree:
    """A workspace's session tree: read-only (nothing is written, not even a schema),
    or checked for damage before anything is written to it."""
    from ._history.store import is_database_location
    from ._history.tree import SessionTree

    if is_database_location(path):  # PostgreSQL checks its own pages; the schema is checked on opening
        from ._history.postgres import PostgresDatabase

        return SessionTree(PostgresDatabase(path, read_only=not write, pool_size=1))
    database = Path(path, "tree.sqlite3")
    if not database.is_file():
        raise StoreError(f"{path} is not a glyphpack workspace (no tree.sqlite3 in it)")
    tree = SessionTree(database, read_only=not write)
    if write:
        try:
            tree.verify()
        except StoreError:
            tree.close()
            raise
    return tree


def _shown(location: str) -> str:
    """A workspace location as it may be printed: a database URL without its password."""
    from ._secrets import redacted

    return redacted(location)


def cmd_tree(args: argparse.Namespace) -> int:
    from ._history.export import draw_tree

    with _tree(args.workspace, write=False) as tree:
        stored = [c.id for c in tree.conversations()]
        if args.conversation and args.conversation not in stored:
            raise StoreError(f"no conversation {args.conversation!r} in {_shown(args.workspace)} (stored: {', '.join(stored) or 'none'})")
        conversations = [args.conversation] if args.conversation else stored
        if not conversations:
            print("(no conversations)")
        for conversation in conversations:
            print("\n".join(draw_tree(tree, conversation, collapse=not args.all, notes=_compaction_notes(args.workspace, conversation))))
    return 0


def _compaction_notes(workspace: str, conversation: str) -> dict[str, str]:
    """``view.compaction_notes`` of a workspace named by its location."""
    from ._history.store import Workspace
    from ._history.view import compaction_notes

    with Workspace(workspace, read_only=True) as store:
        return compaction_notes(store, conversation)


def _agent_with_transcript(workspace: Any, conversation: str, agent: str | None) -> str | None:
    """The agent whose transcript moves with the tree (``--agent``, else the main one),
    or None for a conversation kept in the tree alone."""
    tips = workspace.tree.agent_tips(conversation)
    chosen = agent or next(iter(tips), None)
    if agent is not None and (conversation, agent) not in workspace.transcripts():
        raise StoreError(f"no transcript for agent {agent!r} in {conversation!r} (agents: {', '.join(tips) or 'none'})")
    return chosen if chosen is not None and (conversation, chosen) in workspace.transcripts() else None


def cmd_fork(args: argparse.Namespace) -> int:
    from ._history.store import Workspace

    _tree(args.workspace, write=True).close()  # a workspace, and sound, before anything is written
    with Workspace(args.workspace) as workspace:
        agent = _agent_with_transcript(workspace, args.conversation, args.agent)
        if agent is None:  # a tree without transcripts: the tree alone
            tree = workspace.tree
            print(tree.fork(args.conversation, tree.find(args.conversation, args.at) if args.at else None, new_conversation=args.new))
        else:  # the transcript is copied too, so the new conversation can be resumed
            print(workspace.fork(args.conversation, agent, at=args.at, new_conversation=args.new).conversation)
    return 0


def cmd_branch(args: argparse.Namespace) -> int:
    from ._history.store import Workspace

    _tree(args.workspace, write=True).close()
    with Workspace(args.workspace) as workspace:
        agent = _agent_with_transcript(workspace, args.conversation, args.agent)
        target = workspace.tree.find(args.conversation, args.message)
        if agent is None:
            workspace.tree.branch(args.conversation, target)
            print(f"{args.conversation}: tip is now {target}")
        else:  # the transcript moves with the tip: a session resumes from the branch
            saved = workspace.branch(args.conversation, agent, target)
            print(f"{args.conversation}/{agent}: tip is now {target} ({len(saved.messages)} messages)")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete a conversation: said first, done only with --yes."""
    from ._history.store import Workspace

    _tree(args.workspace, write=True).close()
    with Workspace(args.workspace) as workspace:
        known = {c.id for c in workspace.tree.conversations()}
        if args.conversation not in known:
            raise StoreError(f"no conversation {args.conversation!r} in {_shown(args.workspace)} (stored: {', '.join(sorted(known)) or 'none'})")
        messages = len(workspace.tree.nodes(args.conversation))
        agents = [agent for conversation, agent in workspace.transcripts() if conversation == args.conversation]
        what = f"conversation {args.conversation}: {messages:,} messages in its tree, {len(agents)} transcript(s) ({', '.join(agents) or 'none'}) and their compactions"
        if not args.yes:
            raise UsageError(f"this would delete {what}; nothing was deleted: add --yes to delete it")
        workspace.delete(args.conversation)
    print(f"deleted {what}")
    return 0


def cmd_rename(args: argparse.Namespace) -> int:
    """Give a conversation a title (its id stays: message ids and recall refs use it)."""
    from ._history.store import Workspace

    _tree(args.workspace, write=True).close()
    with Workspace(args.workspace) as workspace:
        workspace.tree.set_title(args.conversation, args.title)
    print(f"{args.conversation}: titled {args.title!r}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ._history.export import export_json, export_markdown

    out = _output_file(args.out)
    if args.format == "html":
        return _export_html(args, out)
    if args.conversation is None:
        raise UsageError(f"--format {args.format} exports one conversation: name it (or use --format html for all)")
    with _tree(args.workspace, write=False) as tree:
        if args.format == "json":
            text = json.dumps(export_json(tree, args.conversation, whole_tree=args.whole_tree), indent=2, ensure_ascii=False)
        else:
            text = export_markdown(tree, args.conversation, whole_tree=args.whole_tree)
    if out is not None:
        _write(out, (text + "\n").encode("utf-8", "surrogatepass"))
    else:
        print(text)
    return 0


def _export_html(args: argparse.Namespace, out: Path | None) -> int:
    from ._history.store import Workspace
    from ._session.navigator import export_html

    if out is None:
        raise UsageError("--format html needs --out FILE.html")
    _tree(args.workspace, write=False).close()  # a workspace, and sound, before anything is read
    with Workspace(args.workspace, read_only=True) as workspace:
        page = export_html(workspace, args.conversation)
    data = page.encode("utf-8")
    _write(out, data)
    print(f"wrote {out} ({len(data):,} bytes); open it in a browser, no network needed")
    return 0


def _load_history(path: str, format: str | None = None) -> list[Message]:
    """The main history of any session file glyphpack reads (its format detected from
    its content unless ``format`` says); a line on stderr says what was read."""
    return list(_load_session(path, format).messages)


def _load_session(path: str, format: str | None = None) -> ImportedSession:
    """Any session file glyphpack reads, as ``_load_history`` says it."""
    from ._history.importers.registry import import_file

    session = import_file(path, format=format)
    if session.report.format != "glyphpack":
        report = session.report
        changed = sum(report.skipped.values()) + sum(report.repaired.values()) + report.made_unique
        print(
            f"read {path} as {report.format}: {len(session.messages):,} messages of agent "
            f"{session.agents[0].name if session.agents else '(none)'}"
            + (f" ({changed:,} lines or blocks skipped or repaired; see glyphpack import)" if changed else ""),
            file=sys.stderr,
        )
    return session


def _write_view(result: Compaction, directory: Path | None) -> list[str]:
    from ._history.codec import history_to_json, json_bytes

    if directory is None:
        return []
    written = []
    for page in result.pages:
        path = directory / f"page-{page.index + 1:04d}.png"
        _write(path, page.png)
        written.append(str(path))
    # The view last: it is what a reader of the folder takes as complete.
    _write(directory / "view.json", json_bytes(history_to_json(result.view)))
    return [str(directory / "view.json"), *written]


def cmd_compact(args: argparse.Namespace) -> int:
    from ._compaction.ladder import compact, shake
    from ._compaction.results import CompactionPolicy
    from ._history.store import is_database_location

    if is_database_location(args.transcript) or Path(args.transcript, "tree.sqlite3").is_file():
        return _compact_in_workspace(args)
    if args.conversation:
        raise UsageError(f"{args.transcript} is a session file, not a workspace: it takes no conversation id")
    if not args.model:
        raise UsageError(f"{args.command} of a file needs --model (the reader's model id)")
    if args.command == "compact" and args.budget is None:
        raise UsageError("compact of a file needs --budget (tokens the view must fit in)")
    out = _output_dir(args.out)
    history = _load_history(args.transcript, args.format)
    fidelity = cast(Fidelity, getattr(args, "fidelity", "exact"))  # shake draws no pages
    policy = CompactionPolicy(protect_turns=args.protect_turns, fidelity=fidelity)
    if args.command == "shake":
        result = shake(history, args.model, policy=policy)
    else:
        from ._compaction.sdk_summary import sdk_summarizer

        summarizer = sdk_summarizer(model=args.summarizer) if args.summarizer else None
        result = compact(history, args.model, args.budget, policy=policy, summarizer=summarizer)
    print("\n".join(result.report.lines()))
    written = _write_view(result, out)
    if written:
        print(f"wrote {written[0]}" + (f" and {len(written) - 1} page(s)" if len(written) > 1 else ""))
    return 0 if result.report.fits else 1


def _compact_in_workspace(args: argparse.Namespace) -> int:
    """``compact``/``shake WORKSPACE CONVERSATION``: the session's own /compact (to
    ``--budget``, default its target) or /shake, kept as the compaction in force; exit
    status 1 when it does not fit, as for a file."""
    from ._history.store import Workspace

    if not args.conversation:
        raise UsageError(f"{args.transcript} is a workspace: name the conversation (glyphpack {args.command} WS CONVERSATION)")
    _tree(args.transcript, write=True).close()  # sound before anything is written
    with Workspace(args.transcript) as workspace:
        tips = workspace.tree.agent_tips(args.conversation)
        agent = _stored_agent(workspace, args.transcript, args.conversation, args.agent or next(iter(tips), None))
        summarizer = getattr(args, "summarizer", None)
        session = _workspace_session(workspace, args.transcript, args.conversation, agent, args, summarizer=summarizer)
        result = session.compact(args.budget) if args.command == "compact" else session.shake()
    print("\n".join(result.report.lines()))
    return 0 if result.report.fits else 1


def cmd_context(args: argparse.Namespace) -> int:
    """What fills the context. A workspace's conversation: exactly ``/context`` (the
    compaction in force, the calibration). A session file: its messages as they are, and
    what its last request measured where the file recorded it."""
    from ._compaction.cost import CostModel, token_bars
    from ._history.store import is_database_location
    from ._providers.resolve import context_window

    if is_database_location(args.transcript) or Path(args.transcript, "tree.sqlite3").is_file():
        return _context_of_workspace(args)
    if args.conversation:
        raise UsageError(f"{args.transcript} is a session file, not a workspace: it takes no conversation id")
    session = _load_session(args.transcript, args.format)
    agents = {agent.name: agent for agent in session.agents}
    if args.agent is not None and args.agent not in agents:
        raise UsageError(f"no agent {args.agent!r} in {args.transcript} (agents: {', '.join(agents) or 'none'})")
    agent = agents[args.agent] if args.agent is not None else (session.agents[0] if session.agents else None)
    # The model the harness called, as the file names it, unless the command names another.
    args.model = args.model or (agent.model if agent is not None else None)
    if not args.model:
        raise UsageError("context of a file needs --model (the reader's model id): the file names none")
    history = list(agent.messages) if agent else []
    compacted = ""
    if agent is not None and agent.compactions:
        # The harness compacted: its requests carry the system prompt and what follows
        # its last compaction (as the workspace's view of an import does).
        start = [m.id for m in history].index(agent.compactions[-1])
        compacted = f" (the harness compacted {len(agent.compactions)} time(s); its requests carry messages {start + 1}-{len(history)})"
        history = [m for m in history[:start] if m.role == "system"] + history[start:]
    cost = CostModel.for_model(args.model)
    # The window the harness recorded it ran with (Codex's model_context_window), else the catalog's.
    window = args.context_window or (agent.context_window if agent is not None else None) or context_window(cost.profile)
    parts: dict[str, int] = {str(kind): tokens for kind, tokens in cost.breakdown(history).items()}
    total = sum(parts.values())
    name = f"agent {agent.name}" if agent else "no agent"
    print(f"{name}: {len(agent.messages) if agent else 0} messages{compacted}, ~{total:,} tokens for {args.model} ({cost.profile.name})")
    if agent is not None and agent.usage:
        # Measured beats estimated: what the harness's last request carried, as its
        # provider counted it, and the part no message in the file accounts for.
        start, end, measured, *_ = agent.usage[-1]
        carried = cost.history(agent.messages[start:end])
        overhead = measured - carried
        print(
            f"the file's last request (messages {start + 1}-{end}) measured {measured:,} input tokens: "
            f"~{carried:,} from its messages, {overhead:+,} the file does not hold (system prompt, tool schemas)"
        )
        parts = {**parts, "overhead": max(overhead, 0)}
        total = sum(parts.values())
    print(f"window {window:,}: {total / window:.0%} used, {max(window - total, 0):,} free" + (" (over the window)" if total > window else ""))
    print("\n".join(token_bars(parts.items(), total)))
    return 0


def _context_of_workspace(args: argparse.Namespace) -> int:
    """``/context`` of a workspace's conversation (``--agent``, else its main agent)."""
    from ._history.store import Workspace

    if not args.conversation:
        raise UsageError(f"{args.transcript} is a workspace: name the conversation (glyphpack context WS CONVERSATION)")
    _tree(args.transcript, write=True).close()  # sound before a session opens on it
    with Workspace(args.transcript) as workspace:
        tips = workspace.tree.agent_tips(args.conversation)
        agent = _stored_agent(workspace, args.transcript, args.conversation, args.agent or next(iter(tips), None))
        session = _workspace_session(workspace, args.transcript, args.conversation, agent, args)
        print(session.command("/context").text)
    return 0


def cmd_workspace_copy(args: argparse.Namespace) -> int:
    from ._history.copy import copy_workspace
    from ._history.store import Workspace

    with Workspace(args.source, read_only=True) as source, Workspace(args.destination) as destination:
        report = copy_workspace(source, destination, progress=lambda line: print(f"  {line}", file=sys.stderr))
        print(
            f"copied {source.location} -> {destination.location}: {report.conversations:,} conversations, "
            f"{report.messages:,} messages, {report.transcripts:,} transcripts, {report.views:,} compaction views; "
            f"both hold the same (compared)"
        )
    return 0


#: The files ``glyphpack import`` takes from a folder: what harnesses write sessions as.
SESSION_SUFFIXES = (".jsonl", ".json", ".traj", ".md", ".db")


def cmd_import(args: argparse.Namespace) -> int:
    """Import, or keep in step, each session file; a folder is walked for session files.
    Each file is its own: one that cannot be read, or whose past changed, is reported on
    its line and the rest go on (exit status 1 when any failed). Ctrl-C stops it between
    or in a file, saying how many were done (exit status 130)."""
    from ._history.store import Workspace

    files = _session_files(args.files) if args.files else _harness_session_files()
    if args.conversation and len(files) != 1:
        raise UsageError(f"--conversation names one conversation, for one file; {len(files)} files were given")
    failed = done = 0
    with Workspace(args.workspace) as workspace:
        try:
            for done, name in enumerate(files):
                if len(files) > 1:
                    print(f"[{done + 1}/{len(files)}] ", end="")
                failed += not _import_file(workspace, name, args)
        except KeyboardInterrupt:
            print(f"\nglyphpack: import interrupted after {done} of {len(files)} files (each one done is kept; "
                  "run the same import again to go on)", file=sys.stderr)
            return 130
    if len(files) > 1:
        print(f"{len(files)} files: {len(files) - failed} imported or in step, {failed} not")
    return 1 if failed else 0


def _import_file(workspace: Any, name: str, args: argparse.Namespace) -> bool:
    """Sync the sessions of file ``name`` into ``workspace``, a line or more each; False
    when it could not be read or a session of it was refused."""
    from ._history.importers.registry import conversation_names, import_sessions, session_source

    try:
        sessions = import_sessions(name, format=args.format)
        if args.conversation and len(sessions) != 1:
            raise UsageError(f"--conversation names one conversation, and {name} holds {len(sessions)} sessions")
    except GlyphpackError as exc:
        print(f"{name}: not imported: {exc}")
        return False
    synced = []
    for session_name, session in sessions:
        label = name if len(sessions) == 1 else f"{name} [{session_name}]"
        source = session_source(Path(name), session_name)
        candidates = list(dict.fromkeys(_conversation_id(n) for n in conversation_names(Path(name), session_name)))
        synced.append(_sync_session(workspace, label, session, args.conversation or candidates, source))
    return all(synced)


def _sync_session(workspace: Any, label: str, session: ImportedSession, names: str | list[str], source: str) -> bool:
    """Keep a conversation in step with one imported session from ``source`` (the one
    named, or the first of ``names`` free or its own: ``Workspace.name_for``), saying
    what was done on a line (and the import's report); False when it was refused."""
    try:
        conversation = names if isinstance(names, str) else workspace.name_for(source, names)
        state, saved = workspace.sync_session(session, conversation, source=source)
    except GlyphpackError as exc:
        print(f"{label}: not imported: {exc}")
        return False
    if state == "unchanged":
        print(f"{label} -> {workspace.location}: conversation {conversation}: unchanged")
        return True
    verb = "imported as" if state == "new" else "appended to"
    print(f"{label} -> {workspace.location}: {verb} conversation {conversation}" + (f" ({session.title})" if session.title else ""))
    for line in session.report.lines():
        print(f"  {line}")
    print(f"  transcripts: {', '.join(f'{t.agent} ({len(t.messages):,} messages)' for t in saved)}")
    return True


def _harness_session_files() -> list[str]:
    """The session files of every harness home on this machine (``homes.find_sessions``),
    each home said on a line; ``UsageError`` when there is none."""
    from ._history.importers.homes import HOMES, find_sessions
    from ._history.importers.registry import read_with_its_session

    found = find_sessions()
    if not found:
        raise UsageError(f"no harness sessions found in this machine's harness homes ({', '.join(sorted({h.where for h in HOMES})[:6])}, ...); "
                         "name the session files or folders to import")
    files: list[str] = []
    for harness in found:
        sessions = [str(p) for p in harness.files if not read_with_its_session(p, set(harness.files))]
        print(f"{harness.harness}: {len(sessions):,} session file(s) in {_shown(str(harness.home))}")
        files += sessions
    return files


def _session_files(paths: Sequence[str]) -> list[str]:
    """The files named, with each folder replaced by the session files under it (any
    depth, sorted); ``UsageError`` for a path that does not exist or a folder with none."""
    from ._history.importers.registry import read_with_its_session

    found: list[str] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files = {p for p in path.rglob("*") if p.is_file() and p.suffix in SESSION_SUFFIXES and not p.name.startswith(".")}
            inside = sorted(str(p) for p in files if not read_with_its_session(p, files))
            if not inside:
                raise UsageError(f"{name} holds no session files ({', '.join(SESSION_SUFFIXES)})")
            found.extend(inside)
        elif path.exists():
            found.append(name)
        else:
            raise UsageError(f"{name}: no such file or folder")
    return found


def _conversation_id(name: str) -> str:
    """A conversation id from a session's name (``import_sessions``), with what an id
    cannot hold replaced."""
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in name).strip("-.")
    return (cleaned or "imported")[:128]


def cmd_proxy_key(args: argparse.Namespace) -> int:
    """A new client key for a person: its digest appended to the keys file, the key
    printed once (on stdout, for the person's harness: ``x-glyphpack-client-key``)."""
    from ._proxy.conversations import CLIENT_KEY_HEADER, ClientKeys

    key = ClientKeys.issue(Path(args.keys), args.person)
    print(key)
    print(f"issued to {args.person}; {args.keys} keeps its digest only. The person's harness sends it as the header "
          f"{CLIENT_KEY_HEADER} (Claude Code: ANTHROPIC_CUSTOM_HEADERS='{CLIENT_KEY_HEADER}: <key>')", file=sys.stderr)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from ._history.codec import history_to_json, json_bytes
    from .testing import generate_session

    out = _output_file(args.out)
    assert out is not None
    history = generate_session(args.chars, args.seed)
    _write(out, json_bytes(history_to_json(history)))
    print(f"wrote {args.out}: {len(history)} messages, {sum(len(m.text) for m in history):,} characters")
    return 0


def _workspace_session(workspace: Any, path: str, conversation: str, agent: str, args: argparse.Namespace, **options: Any) -> Any:
    """A ``Session`` on a stored transcript with what the workspace remembers of it
    (``Workspace.settings``: the model, window and thresholds its last run used; a
    proxy's included), each overridden by what the command says."""
    from ._session.session import Session

    settings = workspace.settings(conversation, agent)
    model = args.model or settings.get("model")
    if model is None:
        raise UsageError(f"pass --model: no model was called on {conversation} {agent} in {_shown(path)}, so the workspace has not recorded one")
    same = model == settings.get("model")  # the window and thresholds remembered are that model's
    window = getattr(args, "context_window", None) or (settings.get("context_window") if same else None)
    thresholds = {key: settings.get(key) for key in ("threshold", "target")} if same and window == settings.get("context_window") else {}
    return Session(workspace, conversation, agent, model=model, context_window=window, **thresholds, **options)


def _stored_agent(workspace: Any, path: str, conversation: str, agent: str | None) -> str:
    """``agent``, when it has a transcript in ``conversation``; else ``StoreError``
    listing what is stored."""
    if agent is None or (conversation, agent) not in workspace.transcripts():
        stored = ", ".join(f"{c} {a}" for c, a in workspace.transcripts()) or "none"
        raise StoreError(f"no transcript for {conversation} {agent or '(no agent)'} in {path} (stored: {stored})")
    return agent


def _stored(args: argparse.Namespace) -> tuple[str, tuple[Any, ...], Any]:
    """The agent a ``refs``/``recall`` command reads (``--agent``, else the main one), its
    stored messages, and the compaction in force for them (None: none)."""
    from ._history.store import Workspace
    from ._history.view import view_for

    with Workspace(args.workspace, read_only=True) as workspace:
        tips = workspace.tree.agent_tips(args.conversation)
        agent = _stored_agent(workspace, args.workspace, args.conversation, args.agent or next(iter(tips), None))
        messages = workspace.load(args.conversation, agent).messages
        return agent, messages, view_for(workspace, args.conversation, agent, messages)


def cmd_refs(args: argparse.Namespace) -> int:
    """Every ref the conversation's next request carries (each stub's and note's), with
    where it is and what it says, and the range the compaction in force stands for."""
    from ._history.recall import hinted_refs, range_ref
    from ._history.view import request_messages

    agent, messages, view = _stored(args)
    sent, _ = request_messages(view, messages)
    refs = hinted_refs(sent)
    print(f"{args.conversation}/{agent}: {len(refs):,} ref(s) in the next request ({len(sent):,} messages)")
    for ref, index in refs:
        message = sent[index]
        line = next((line for line in message.text.splitlines() if ref in line), message.text)
        print(f"  {json.dumps(ref, ensure_ascii=False)}  message {index + 1} ({message.role}): {' '.join(line.split())[:120]}")
    if view is not None and view.source is not None:
        print(f"the compaction in force ({view.trigger}) stands for {json.dumps(range_ref(*view.source), ensure_ascii=False)}: "
              f"glyphpack recall {_shown(args.workspace)} {args.conversation} '{range_ref(*view.source)}'")
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    """What a ref stands for, exactly, from the stored transcript (page ``--page`` of it
    when long); exit 2 with the reason when nothing has that ref."""
    from ._compaction.snapshot import serialize_messages
    from ._history.recall import recall

    _, messages, _ = _stored(args)
    answer = recall(messages, args.ref, args.page, range_text=serialize_messages)
    if answer.is_error:
        raise UsageError(answer.as_text().removeprefix("glyphpack recall: "))
    print(answer.as_text())
    return 0


def cmd_session(args: argparse.Namespace) -> int:
    """A shell over a stored session's slash commands: no model is called. Exit status 1
    when a /compact or /shake did not fit its budget (kept, as the session keeps it)."""
    from ._history.store import Workspace

    _tree(args.workspace, write=True).close()  # a workspace, and sound, before anything is written
    with Workspace(args.workspace) as workspace:
        _stored_agent(workspace, args.workspace, args.conversation, args.agent)
        session = _workspace_session(workspace, args.workspace, args.conversation, args.agent, args, summarizer=args.summarizer)
        interactive = not args.command and sys.stdin.isatty()
        unfit = False
        if interactive:
            print(f"{session!r}; /help lists the commands, an empty line or Ctrl-D ends")
        for line in _shell_lines(args.command, interactive):
            line = line.strip()
            if line in ("", "exit", "quit") and (interactive or line):
                break
            if not line:
                continue
            try:
                if not line.startswith("/"):
                    raise UsageError(
                        f"{line.split()[0]!r} is not a command: this shell runs slash commands over the stored "
                        "session and calls no model; /help lists them"
                    )
                result = session.command(line)
                print(result.text, flush=True)
                unfit = unfit or result.data.get("fits") is False
            except GlyphpackError as exc:
                print(f"glyphpack: error: {' '.join(str(exc).split())}", file=sys.stderr, flush=True)
                if not interactive:  # what a script runs next may depend on what failed
                    return 2
    return 1 if unfit else 0


def _shell_lines(commands: list[str] | None, interactive: bool) -> Iterator[str]:
    """The session shell's input: the ``-c`` commands, piped lines, or a prompt with line
    editing and history (``readline``, where the platform has it)."""
    if commands:
        yield from commands
        return
    if not interactive:
        yield from sys.stdin
        return
    try:
        import readline  # noqa: F401  (input() then edits lines and keeps a history)
    except ImportError:
        pass
    while True:
        try:
            yield input("glyphpack> ")
        except EOFError:
            print()
            return


def cmd_eval(args: argparse.Namespace) -> int:
    """The reading probe with the user's key (``--yes`` to spend), or ``--apply``."""
    from ._eval import run
    from ._history.apis import native_api

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


def cmd_proxy(args: argparse.Namespace) -> int:
    try:
        from ._proxy.conversations import ClientKeys, ProxySettings, Recorder
        from ._proxy.log import ProxyLog
        from ._proxy.server import STATUS_PATH, Proxy, serve, upstream_url
    except ImportError as exc:
        raise UsageError(f"glyphpack proxy needs its extra ({exc.name} is missing): pip install '.[proxy]' (the proxy extra)") from None
    from ._history.store import Workspace
    from ._session.session import Thresholds

    upstream = upstream_url(args.upstream)
    if args.context_window is not None:  # the limits checked before anything listens
        Thresholds.for_window(args.context_window, args.threshold, args.target)
    for name in args.identity_header:
        if not re.fullmatch(r"[A-Za-z0-9-]{1,64}", name):
            raise UsageError(f"--identity-header must be a header name (letters, digits and '-'), not {name[:64]!r}")
    if args.require_client_key and not args.client_keys:
        raise UsageError("--require-client-key needs --client-keys FILE (the keys glyphpack proxy-key issued)")
    keys = ClientKeys(Path(args.client_keys), required=args.require_client_key) if args.client_keys else None
    settings = ProxySettings(context_window=args.context_window, threshold=args.threshold, target=args.target,
                             identity_headers=tuple(name.lower() for name in args.identity_header), client_keys=keys)
    summarizer = None if args.summarizer == "none" else args.summarizer
    json_log = Path(args.log_json) if args.log_json else None
    if json_log is not None:  # checked before anything listens
        try:
            json_log.open("a", encoding="utf-8").close()
        except OSError as exc:
            raise UsageError(f"--log-json {json_log}: cannot write it ({exc.strerror})") from None
    log = ProxyLog(None if args.quiet else sys.stderr, json_log)
    with Workspace(args.workspace) as workspace:
        recorder = Recorder(workspace, settings)
        known = recorder.index_workspace()

        def announce(url: str) -> None:
            print(f"glyphpack proxy on {url} -> {_shown(upstream)}; workspace {workspace.location} ({known} conversations known)", file=sys.stderr)
            print(f"  Claude Code: ANTHROPIC_BASE_URL={url} claude    OpenAI SDKs: OPENAI_BASE_URL={url}/v1    totals: {url}{STATUS_PATH}", file=sys.stderr, flush=True)

        serve(Proxy(recorder, upstream, summarizer=summarizer, log=log).app, args.host, args.port, announce=announce)
        print(log.summary(), file=sys.stderr, flush=True)  # it returns once SIGINT or SIGTERM stopped it
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """The workspace in a browser: an index of projects and conversations, each
    conversation's page, search across all of them and recall from the page."""
    try:
        from ._proxy.server import serve
        from ._session.serve import serve_app
    except ImportError as exc:
        raise UsageError(f"glyphpack serve needs the proxy extra ({exc.name} is missing): pip install '.[proxy]'") from None
    from ._history.store import Workspace

    with Workspace(args.workspace, read_only=True) as workspace:  # it only reads: the proxy may be writing
        count = len(workspace.tree.conversations())

        def announce(url: str) -> None:
            print(f"glyphpack serve on {url}: workspace {workspace.location} ({count} conversations); Ctrl-C stops it", file=sys.stderr, flush=True)

        serve(serve_app(workspace), args.host, args.port, announce=announce)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="glyphpack", description="Text packed into pages of bitmap glyphs for vision models.")
    parser.add_argument("--version", action="version", version=f"glyphpack {__version__}")
    parser.add_argument("--debug", action="store_true", help="show a traceback instead of a one-line error")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("render", help="render a text file to PNG pages and report what it cost")
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
    p.set_defaults(run=cmd_render)

    p = sub.add_parser("read", help="decode page PNGs back to text")
    p.add_argument("pages", nargs="+", metavar="PAGE.png")
    p.add_argument("--shape", choices=sorted(SHAPE_NAMES), default=None, help="default: the shape the page says it was drawn in")
    p.add_argument("--layout", choices=LAYOUTS, default=None, help="default: the layout the page says, else flow")
    p.set_defaults(run=cmd_read)

    p = sub.add_parser("profiles", help="page size and characters per billed token per provider profile")
    p.add_argument("--shape", choices=sorted(SHAPE_NAMES) + ["all"], help="one shape's rows on every route, or all (default: each model's default, then 5x8)")
    p.add_argument("--model", action="append", metavar="ID", help="what this model gets by default (its exact and gist shapes); repeatable")
    p.add_argument("--json", action="store_true", help="every profile and shape, as JSON")
    p.set_defaults(run=cmd_profiles)

    p = sub.add_parser("legibility", help="measure legibility under downscaling; table and plot")
    p.add_argument("--shape", choices=sorted(SHAPE_NAMES), help="one shape (default: every shape)")
    p.add_argument("--out", metavar="FILE.png", help="write the plot here")
    p.add_argument("--json", action="store_true", help="print every measurement as JSON")
    p.set_defaults(run=cmd_legibility)

    def tree_command(
        name: str, helptext: str, run: Callable[[argparse.Namespace], int], conversation_nargs: str | None = None
    ) -> argparse.ArgumentParser:
        """A subcommand over a workspace and one of its conversations."""
        command = sub.add_parser(name, help=helptext)
        command.add_argument("workspace", help=WORKSPACE_HELP)
        command.add_argument("conversation", nargs=conversation_nargs)
        command.set_defaults(run=run)
        return command

    p = tree_command("tree", "draw a workspace's conversations with their branches and tips", cmd_tree, "?")
    p.add_argument("--all", action="store_true", help="every message (default: long runs with nothing to mark counted on one line)")
    p = tree_command("fork", "copy a conversation's path into a new conversation", cmd_fork)
    p.add_argument("--at", metavar="MESSAGE", help="fork at this message (id or unique prefix; default: the tip)")
    p.add_argument("--new", metavar="ID", help="the new conversation's id (default: generated)")
    p.add_argument("--agent", help="whose history (default: the conversation's main agent)")
    p = tree_command("branch", "move a conversation's tip to one of its messages", cmd_branch)
    p.add_argument("message", help="message id or a unique prefix of it")
    p.add_argument("--agent", help="whose tip and transcript (default: the conversation's main agent)")
    p = tree_command("delete", "delete a conversation: its tree, transcripts and compactions (says what first; --yes does it)", cmd_delete)
    p.add_argument("--yes", action="store_true", help="delete it (without: print what would be deleted, delete nothing)")
    p = tree_command("rename", "give a conversation a title (its id stays)", cmd_rename)
    p.add_argument("title")
    p = tree_command("export", "a conversation as JSON or Markdown, or the workspace as a browsable HTML file", cmd_export, "?")
    p.add_argument("--format", choices=("json", "md", "html"), default="md")
    p.add_argument("--whole-tree", action="store_true", help="every branch, not just the path to the tip")
    p.add_argument("--out", metavar="FILE")

    for name, helptext in (
        ("compact", "run the compaction ladder on a transcript until it fits a budget"),
        ("shake", "run only the free rungs (reasoning drop, elision, image drop) on a transcript"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("transcript", metavar="FILE|WORKSPACE", help="any session file glyphpack reads (see import), or a workspace")
        p.add_argument("conversation", nargs="?", help="with a workspace: the conversation (its compaction is kept in force)")
        p.add_argument("--agent", help="with a workspace: whose transcript (default: the main agent)")
        p.add_argument("--format", choices=FORMAT_NAMES, help="the file's format (default: detected from its content)")
        p.add_argument("--model", help="the reader's model id (a workspace's default: the one its conversation ran with)")
        if name == "compact":
            p.add_argument("--budget", type=int, help="tokens the view must fit in (a workspace's default: the session's target)")
            p.add_argument("--summarizer", metavar="MODEL",
                           help="the last rung: this model summarizes, through its SDK with the key in its usual variable")
            p.add_argument("--fidelity", choices=("exact", "gist", "dense"), default="exact",
                           help="snapshot pages in the shape the reader reads exactly (default), for the gist, or the densest")
        p.add_argument("--protect-turns", type=int, default=2, help="newest user turns the free rungs leave alone")
        p.add_argument("--out", metavar="DIR", help="write view.json and the snapshot pages here")
        p.set_defaults(run=cmd_compact)

    p = sub.add_parser("context", help="what fills the context: tokens per category, with bars")
    p.add_argument("transcript", metavar="FILE|WORKSPACE", help="any session file glyphpack reads (see import), or a workspace")
    p.add_argument("conversation", nargs="?", help="with a workspace: the conversation (its /context, compaction included)")
    p.add_argument("--agent", help="whose history (default: the main agent)")
    p.add_argument("--format", choices=FORMAT_NAMES, help="the file's format (default: detected from its content)")
    p.add_argument("--model", help="the reader's model id (a workspace's default: the one its conversation ran with)")
    p.add_argument("--context-window", type=int, metavar="TOKENS",
                   help="the model's window (default: what the workspace recorded, else its provider family's)")
    p.set_defaults(run=cmd_context)

    p = sub.add_parser("import", help="import session files (Claude Code, pi, Codex, OpenHands, SWE-agent, mini-swe-agent, aider, Gemini CLI, provider lists) into a workspace")
    p.add_argument("files", nargs="*", metavar="FILE", help="session files, or folders of them (walked at any depth): a conversation imported before gets what is new appended; "
                   "none: every harness home on this machine (Claude Code, Codex, Gemini CLI, Copilot CLI, Kimi CLI, pi, Goose, Crush, Cline, Roo Code, Kilo Code)")
    p.add_argument("--workspace", required=True, metavar="WS", help=WORKSPACE_HELP + " (created if missing)")
    p.add_argument("--format", choices=FORMAT_NAMES, help="the files' format (default: detected from each file's content)")
    p.add_argument("--conversation", metavar="ID", help="the conversation id, for one file (default: the file name)")
    p.set_defaults(run=cmd_import)

    p = sub.add_parser("workspace", help="move a workspace between a folder and PostgreSQL")
    workspace_commands = p.add_subparsers(dest="workspace_command", required=True, metavar="COMMAND")
    p = workspace_commands.add_parser("copy", help="copy every conversation, transcript and view into an empty workspace, then compare both")
    p.add_argument("source", help=WORKSPACE_HELP)
    p.add_argument("destination", help=WORKSPACE_HELP + " (new or empty)")
    p.set_defaults(run=cmd_workspace_copy)

    p = sub.add_parser("refs", help="every ref a conversation's next request carries, and what the compaction in force stands for")
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("conversation")
    p.add_argument("--agent", help="the agent (default: the conversation's main agent)")
    p.set_defaults(run=cmd_refs)

    p = sub.add_parser("recall", help="what a ref stands for, exactly, from the stored transcript")
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("conversation")
    p.add_argument("ref", help="as a stub or note names it (glyphpack refs lists them)")
    p.add_argument("--page", type=int, default=1, help="the page of a long text (default 1)")
    p.add_argument("--agent", help="the agent (default: the conversation's main agent)")
    p.set_defaults(run=cmd_recall)

    p = sub.add_parser("session", help="a shell of slash commands (/context, /tree, /compact, ...) over a stored session")
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("conversation")
    p.add_argument("agent")
    p.add_argument("--model", help="the reader's model id (page geometry and prices; default: the one the session ran with)")
    p.add_argument("--summarizer", metavar="MODEL", help="the model /compact summarizes with (its key in its usual variable)")
    p.add_argument("-c", "--command", action="append", metavar="LINE",
                   help="run this command and exit (repeatable); default: read commands from stdin")
    p.set_defaults(run=cmd_session)

    p = sub.add_parser("eval", help="measure how well a model reads pages, with your own key (prints the cost first)")
    p.add_argument("--model", help="the model id, as its SDK takes it")
    p.add_argument("--api", choices=APIS,
                   help="which API (default: from the model's provider)")
    p.add_argument("--base-url", help="an OpenAI-compatible (or Anthropic-compatible) endpoint")
    p.add_argument("--shapes", help="comma-separated shapes (default: 5x8,6x13,8x13-loose,9x15-loose,10x20)")
    p.add_argument("--per-shape", type=int, default=10, help="probe pages per shape (default 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="eval", metavar="DIR", help="results.json, report.md and plot.png go here (default: eval)")
    p.add_argument("--yes", action="store_true", help="spend: without it only the estimate is printed")
    p.add_argument("--apply", metavar="RESULTS.json", help="write the reading profile these results support")
    p.set_defaults(run=cmd_eval)

    p = sub.add_parser("proxy", help="an Anthropic-, OpenAI- and Gemini-compatible endpoint that records and compacts any harness's requests")
    p.add_argument("--upstream", required=True, metavar="anthropic|openai|gemini|URL", help="where requests go (the only place they go)")
    p.add_argument("--workspace", required=True, metavar="WS", help=WORKSPACE_HELP + ", where conversations are recorded")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8787, help="the port (default 8787; 0: any free one, printed)")
    p.add_argument("--context-window", type=int, metavar="TOKENS", help="the models' window (default: each provider family's)")
    p.add_argument("--threshold", type=int, metavar="TOKENS", help="compact at this many (default: where it bills least, at most the window less a reply reserve)")
    p.add_argument("--target", type=int, metavar="TOKENS", help="compact to this many (default: where it bills least)")
    p.add_argument("--summarizer", default="same", metavar="MODEL|same|none",
                   help="the model that summarizes, through the upstream with the caller's key (default: the request's own)")
    p.add_argument("--log-json", metavar="FILE", help="also append one JSON object per request to FILE (counts, statuses, times; never content or keys)")
    p.add_argument("--quiet", action="store_true", help="no line per request on stderr (the totals still print at exit)")
    p.add_argument("--identity-header", action="append", default=[], metavar="NAME",
                   help="a header that tells clients apart besides their keys (repeatable): a gateway's per-user header")
    p.add_argument("--client-keys", metavar="FILE",
                   help="the client keys issued with glyphpack proxy-key: a request with one (x-glyphpack-client-key) is its person's, whatever key goes upstream")
    p.add_argument("--require-client-key", action="store_true", help="refuse (401) a request without one of those keys")
    p.set_defaults(run=cmd_proxy)

    p = sub.add_parser("serve", help="browse a workspace: an index of projects and conversations, search across them, recall from the page")
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free one)")
    p.set_defaults(run=cmd_serve)
    p = sub.add_parser("proxy-key", help="issue a client key for a person (their conversations stay theirs when their upstream token rotates)")
    p.add_argument("person", help="who the key is for (a name: letters, digits, '.', '_', '-'); several keys may name one person")
    p.add_argument("--keys", required=True, metavar="FILE", help="the file of issued keys' digests the proxy reads (--client-keys); made if missing")
    p.set_defaults(run=cmd_proxy_key)

    p = sub.add_parser("generate-session", help="write a realistic generated agent session (for trying the ladder)")
    p.add_argument("out", metavar="FILE.json")
    p.add_argument("--chars", type=int, default=300_000)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=cmd_generate)

    p = sub.add_parser("warm", help="build the font atlases and compile the render kernels into the caches now")
    p.set_defaults(run=cmd_warm)

    p = sub.add_parser("fonts", help="list shapes and their fonts' coverage")
    p.add_argument("--confusables", metavar="SHAPE", choices=sorted(SHAPE_NAMES),
                   help="list glyph pairs of SHAPE's font that are identical or 1-2 px apart")
    p.set_defaults(run=cmd_fonts)
    return parser


def _one_line_warning(message: Warning | str, category: type[Warning], *rest: Any, **kwargs: Any) -> str:
    return f"glyphpack: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Exit codes: 0 done, 1 the work did not succeed (a view that does
    not fit, an internal error), 2 bad input or paths. Errors are one line on stderr;
    ``--debug`` shows the traceback instead."""
    args = build_parser().parse_args(argv)
    # Warnings (an unknown model id, say) read as one line, like the errors.
    warnings.formatwarning = _one_line_warning
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("\nglyphpack: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        code, text = _error_line(exc)
        print(f"glyphpack: error: {text}", file=sys.stderr)
        return code


def _error_line(exc: Exception) -> tuple[int, str]:
    """(exit code, one line) for an error that ends a command."""
    if isinstance(exc, GlyphpackError):
        return 2, " ".join(str(exc).split())
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return 2, f"{where}{exc.strerror or exc}"
    if isinstance(exc, MemoryError):
        return 1, "out of memory; try a smaller input"
    return 1, f"internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); run with --debug for the traceback"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
