"""The commands that measure and compact a history: context, compact, shake, session, generate-session."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._errors import GlyphpackError, UsageError
from .._types import Fidelity
from .common import FORMAT_NAMES, WORKSPACE_HELP, Command, _output_dir, _output_file, _shown, _stored_agent, _tree, _write

if TYPE_CHECKING:
    from .._compaction.results import Compaction
    from .._history.imported import ImportedAgent, ImportedSession
    from .._history.messages import Message


def _carried(agent: ImportedAgent | None) -> tuple[list[Message], str]:
    """What the harness's next request carries of ``agent``'s history, and a note saying
    so when the harness compacted: the system prompt and what follows its last
    compaction (as the workspace's view of an import does); else the whole history."""
    history = list(agent.messages) if agent else []
    if agent is None or not agent.compactions:
        return history, ""
    start = [m.id for m in history].index(agent.compactions[-1])
    note = f" (the harness compacted {len(agent.compactions)} time(s); its requests carry messages {start + 1}-{len(history)})"
    return [m for m in history[:start] if m.role == "system"] + history[start:], note


def _load_session(path: str, format: str | None = None) -> ImportedSession:
    """Any session file glyphpack reads (its format detected from its content unless
    ``format`` says); a line on stderr says what was read."""
    from .._importers.registry import import_file

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
    from .._history.codec import history_to_json, json_bytes

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
    from .._compaction.ladder import compact, shake
    from .._compaction.results import CompactionPolicy
    from .._history.store import is_database_location

    if is_database_location(args.transcript) or Path(args.transcript, "tree.sqlite3").is_file():
        return _compact_in_workspace(args)
    if args.conversation:
        raise UsageError(f"{args.transcript} is a session file, not a workspace: it takes no conversation id")
    if args.command == "compact" and args.budget is None:
        raise UsageError("compact of a file needs --budget (tokens the view must fit in)")
    out = _output_dir(args.out)
    session = _load_session(args.transcript, args.format)
    agent = session.agents[0] if session.agents else None
    # The model the harness called, as the file names it, unless the command names another.
    args.model = args.model or (agent.model if agent is not None else None)
    if not args.model:
        raise UsageError(f"{args.command} of a file needs --model (the reader's model id): the file names none")
    # What the harness's requests carry: what it already compacted stays put away.
    history, compacted = _carried(agent)
    if compacted:
        print(f"{args.command} of what the harness's next request carries{compacted}", file=sys.stderr)
    fidelity = cast(Fidelity, getattr(args, "fidelity", "exact"))  # shake draws no pages
    policy = CompactionPolicy(protect_turns=args.protect_turns, fidelity=fidelity)
    if args.command == "shake":
        result = shake(history, args.model, policy=policy)
    else:
        from .._compaction.sdk_summary import sdk_summarizer

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
    from .._history.store import Workspace

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
    from .._compaction.cost import CostModel, token_bars
    from .._history.store import is_database_location
    from .._providers.resolve import context_window

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
    history, compacted = _carried(agent)
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
    from .._history.store import Workspace

    if not args.conversation:
        raise UsageError(f"{args.transcript} is a workspace: name the conversation (glyphpack context WS CONVERSATION)")
    _tree(args.transcript, write=True).close()  # sound before a session opens on it
    with Workspace(args.transcript) as workspace:
        tips = workspace.tree.agent_tips(args.conversation)
        agent = _stored_agent(workspace, args.transcript, args.conversation, args.agent or next(iter(tips), None))
        session = _workspace_session(workspace, args.transcript, args.conversation, agent, args)
        print(session.command("/context").text)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from .._history.codec import history_to_json, json_bytes
    from ..testing import generate_session

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
    from .._session.session import Session

    settings = workspace.settings(conversation, agent)
    model = args.model or settings.get("model")
    if model is None:
        raise UsageError(f"pass --model: no model was called on {conversation} {agent} in {_shown(path)}, so the workspace has not recorded one")
    same = model == settings.get("model")  # the window and thresholds remembered are that model's
    window = getattr(args, "context_window", None) or (settings.get("context_window") if same else None)
    thresholds = {key: settings.get(key) for key in ("threshold", "target")} if same and window == settings.get("context_window") else {}
    return Session(workspace, conversation, agent, model=model, context_window=window, **thresholds, **options)


def cmd_session(args: argparse.Namespace) -> int:
    """A shell over a stored session's slash commands: no model is called. Exit status 1
    when a /compact or /shake did not fit its budget (kept, as the session keeps it)."""
    from .._history.store import Workspace

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


def _ladder_arguments(p: argparse.ArgumentParser, *, budget: bool) -> None:
    p.add_argument("transcript", metavar="FILE|WORKSPACE", help="any session file glyphpack reads (see import), or a workspace")
    p.add_argument("conversation", nargs="?", help="with a workspace: the conversation (its compaction is kept in force)")
    p.add_argument("--agent", help="with a workspace: whose transcript (default: the main agent)")
    p.add_argument("--format", choices=FORMAT_NAMES, help="the file's format (default: detected from its content)")
    p.add_argument("--model", help="the reader's model id (a workspace's default: the one its conversation ran with)")
    if budget:
        p.add_argument("--budget", type=int, help="tokens the view must fit in (a workspace's default: the session's target)")
        p.add_argument("--summarizer", metavar="MODEL",
                       help="the last rung: this model summarizes, through its SDK with the key in its usual variable")
        p.add_argument("--fidelity", choices=("exact", "gist", "dense"), default="exact",
                       help="snapshot pages in the shape the reader reads exactly (default), for the gist, or the densest")
    p.add_argument("--protect-turns", type=int, default=2, help="newest user turns the free rungs leave alone")
    p.add_argument("--out", metavar="DIR", help="write view.json and the snapshot pages here")


def _context_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("transcript", metavar="FILE|WORKSPACE", help="any session file glyphpack reads (see import), or a workspace")
    p.add_argument("conversation", nargs="?", help="with a workspace: the conversation (its /context, compaction included)")
    p.add_argument("--agent", help="whose history (default: the main agent)")
    p.add_argument("--format", choices=FORMAT_NAMES, help="the file's format (default: detected from its content)")
    p.add_argument("--model", help="the reader's model id (a workspace's default: the one its conversation ran with)")
    p.add_argument("--context-window", type=int, metavar="TOKENS",
                   help="the model's window (default: what the workspace recorded, else its provider family's)")


def _session_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("conversation")
    p.add_argument("agent")
    p.add_argument("--model", help="the reader's model id (page geometry and prices; default: the one the session ran with)")
    p.add_argument("--summarizer", metavar="MODEL", help="the model /compact summarizes with (its key in its usual variable)")
    p.add_argument("-c", "--command", action="append", metavar="LINE",
                   help="run this command and exit (repeatable); default: read commands from stdin")


def _generate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", metavar="FILE.json")
    p.add_argument("--chars", type=int, default=300_000)
    p.add_argument("--seed", type=int, default=0)


COMMANDS = (
    Command("compact", "run the compaction ladder on a transcript until it fits a budget", lambda p: _ladder_arguments(p, budget=True), cmd_compact),
    Command("shake", "run only the free rungs (reasoning drop, elision, image drop) on a transcript", lambda p: _ladder_arguments(p, budget=False),
            cmd_compact),
    Command("context", "what fills the context: tokens per category, with bars", _context_arguments, cmd_context),
    Command("session", "a shell of slash commands (/context, /tree, /compact, ...) over a stored session", _session_arguments, cmd_session),
    Command("generate-session", "write a realistic generated agent session (for trying the ladder)", _generate_arguments, cmd_generate),
)
