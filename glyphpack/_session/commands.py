"""Slash commands over a session: the text a harness shows, and the figures.

The commands take the session as ``Any`` (a ``Session``): this module sits below
``session.py``, which imports it.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from .._compaction.cost import token_bars
from .._errors import UsageError
from .._history.export import draw_tree, short_id
from .._history.view import compaction_notes
from .._types import public

Session = Any


@public
@dataclasses.dataclass(frozen=True)
class CommandResult:
    """What a slash command did: ``text`` to show, and its figures in ``data``."""

    command: str
    text: str
    data: Mapping[str, Any] = dataclasses.field(default_factory=dict)

HELP = """\
/compact [BUDGET]      compact now (to BUDGET tokens; default: the session's target) and keep it
/shake                 only the free rungs (reasoning drop, elision, image drop), kept
/context               what the next request holds, by category, and when it compacts
/tree [all]            the conversation's tree: branches, forks, rewinds, each agent's tip (all: no run counted)
/branch ID             make the path to message ID (or a unique prefix) this agent's history
/fork [NEW_ID]         copy this history into a new conversation and continue there
/checkpoint NAME       mark the current end
/rewind NAME DIGEST    back to checkpoint NAME, appending DIGEST; the explored path stays in the tree
/recall REF [PAGE]     what a compaction's note with REF stands for, exactly, from the stored transcript
/help                  this list"""


def _compact(session: Session, args: list[str]) -> CommandResult:
    if len(args) > 1 or (args and not args[0].replace(",", "").replace("_", "").isdigit()):
        raise UsageError("usage: /compact [BUDGET] (a number of tokens)")
    budget = int(args[0].replace(",", "").replace("_", "")) if args else None
    result = session.compact(budget)
    return CommandResult("/compact", "\n".join(result.report.lines()), result.report.as_dict())


def _shake(session: Session, args: list[str]) -> CommandResult:
    _no_args("/shake", args)
    result = session.shake()
    return CommandResult("/shake", "\n".join(result.report.lines()), result.report.as_dict())


def _context(session: Session, args: list[str]) -> CommandResult:
    _no_args("/context", args)
    view, prefix = session.request_view()
    cost = session.cost()
    parts = cost.breakdown(view)
    overhead = session.estimator.overhead
    total = sum(parts.values()) + overhead
    limits = session.thresholds
    threshold = session.threshold
    where = "" if threshold == limits.threshold else f", where it bills least (the window's threshold: {limits.threshold:,})"
    lines = [
        f"{session.conversation}/{session.agent}: {len(session.messages):,} stored messages; the next request "
        f"carries {len(view):,} (~{total:,} tokens for {session.model}, {cost.profile.name})",
        f"window {limits.window:,} ({max(limits.window - total, 0):,} free); compacts at {threshold:,} down to {session.target:,} "
        f"({total / threshold:.0%} of the threshold{where})",
    ]
    stored = session.view
    if stored is not None:
        lines.append(
            f"compaction in force ({stored.trigger}): {prefix:,} messages stand for the transcript up to "
            f"{short_id(stored.covers)}; {stored.pages} page(s)" + (f" in {stored.shape}" if stored.shape else "")
            + "; byte-identical until the next compaction"
        )
    else:
        lines.append("no compaction: the full transcript is sent")
    lines += token_bars([*parts.items(), *([("overhead", overhead)] if overhead else [])], total)
    data = {"messages": len(session.messages), "request_messages": len(view), "prefix": prefix, "tokens": total,
            "threshold": threshold, "target": session.target, "window": limits.window, "categories": dict(parts)}
    return CommandResult("/context", "\n".join(lines), data)


def _tree(session: Session, args: list[str]) -> CommandResult:
    if args not in ([], ["all"]):
        raise UsageError("usage: /tree [all] (all: every message, long plain runs not counted on one line)")
    tree = session.workspace.tree
    lines = draw_tree(tree, session.conversation, collapse=not args, notes=compaction_notes(session.workspace, session.conversation))
    return CommandResult("/tree", "\n".join(lines), {"nodes": len(tree.nodes(session.conversation))})


def _branch(session: Session, args: list[str]) -> CommandResult:
    if len(args) != 1:
        raise UsageError("usage: /branch ID (a message id or a unique prefix, as /tree shows)")
    session.branch(args[0])
    tip = session.messages[-1].id if session.messages else None
    return CommandResult("/branch", f"{session.agent} is now at {tip} ({len(session.messages)} messages)", {"tip": tip})


def _fork(session: Session, args: list[str]) -> CommandResult:
    if len(args) > 1:
        raise UsageError("usage: /fork [NEW_CONVERSATION_ID]")
    old = session.conversation
    new = session.fork(args[0] if args else None)
    carried = "with the compaction in force" if session.view is not None else "with no compaction in force"
    return CommandResult(
        "/fork", f"forked {old} into {new} ({carried}); this session continues in {new}", {"conversation": new}
    )


def _checkpoint(session: Session, args: list[str]) -> CommandResult:
    if len(args) != 1:
        raise UsageError("usage: /checkpoint NAME")
    session.checkpoint(args[0])
    return CommandResult("/checkpoint", f"checkpoint {args[0]!r} at message {len(session.messages)}", {"name": args[0]})


def _rewind(session: Session, args: list[str]) -> CommandResult:
    if len(args) < 2:
        raise UsageError("usage: /rewind NAME DIGEST (what was learned since the checkpoint)")
    session.rewind(args[0], " ".join(args[1:]))
    return CommandResult(
        "/rewind", f"rewound to {args[0]!r}: {len(session.messages)} messages; the explored path stays in /tree", {"name": args[0]}
    )


def _recall(session: Session, args: list[str]) -> CommandResult:
    if len(args) not in (1, 2) or (len(args) == 2 and not args[1].isdigit()):
        raise UsageError("usage: /recall REF [PAGE] (REF as a compaction's note names it)")
    answer = session.recall(args[0], int(args[1]) if len(args) == 2 else 1)
    if answer.is_error:
        raise UsageError(answer.content[0].text)
    return CommandResult("/recall", answer.as_text(), {"ref": args[0], "blocks": len(answer.content)})


def _help(session: Session, args: list[str]) -> CommandResult:
    return CommandResult("/help", HELP)


def _no_args(name: str, args: list[str]) -> None:
    if args:
        raise UsageError(f"{name} takes no arguments")


COMMANDS: dict[str, Callable[[Session, list[str]], CommandResult]] = {
    "/compact": _compact,
    "/shake": _shake,
    "/context": _context,
    "/tree": _tree,
    "/branch": _branch,
    "/fork": _fork,
    "/checkpoint": _checkpoint,
    "/rewind": _rewind,
    "/recall": _recall,
    "/help": _help,
}


def run_command(session: Session, line: str) -> CommandResult:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"cannot parse {line!r}: {exc}") from None
    if not words or words[0] not in COMMANDS:
        raise UsageError(f"unknown command {line.split()[0] if line.split() else line!r}; commands: {', '.join(COMMANDS)}")
    return COMMANDS[words[0]](session, words[1:])
