"""Export a conversation (its path or its whole tree) as JSON or Markdown, and draw it."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from .._types import public
from .codec import message_to_json
from .messages import Message, first_task
from .tree import Node, SessionTree


@public
def export_json(tree: SessionTree, conversation: str, *, whole_tree: bool = False) -> dict[str, Any]:
    """The conversation as a JSON-ready dict: its path (root to tip), or every message
    with its parent when ``whole_tree``."""
    info = tree.conversation(conversation)
    out: dict[str, Any] = {"conversation": info.id, "title": info.title, "tip": info.tip}
    if info.forked_from:
        out["forked_from"] = {"conversation": info.forked_from, "message": info.forked_at}
    if whole_tree:
        out["messages"] = [message_to_json(n.message) | {"parent": n.parent} for n in tree.nodes(conversation)]
    else:
        out["messages"] = [message_to_json(m) for m in tree.path(conversation)]
    return out


def short_id(message_id: str) -> str:
    """The first 8 characters of a message id's own part (after a conversation prefix)."""
    return message_id.rsplit("/", 1)[-1][:8]


def clock(time: float | None, *, date: bool = True) -> str:
    """A message's time as UTC text (``2026-02-12 16:02:48``, or ``16:02`` without the
    date); "" when unknown."""
    if time is None:
        return ""
    moment = datetime.datetime.fromtimestamp(time, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S") if date else moment.strftime("%H:%M")


def message_markdown(message: Message) -> str:
    body = "\n\n".join(b.markdown() for b in message.content)
    when = f" · {clock(message.time)} UTC" if message.time is not None else ""
    return f"### {message.role} `{short_id(message.id)}`{when}\n\n{body}\n"


@public
def export_markdown(tree: SessionTree, conversation: str, *, whole_tree: bool = False) -> str:
    """The conversation as Markdown: its path, or every branch when ``whole_tree``."""
    info = tree.conversation(conversation)
    lines = [f"# {info.title or info.id}\n"]
    if whole_tree:
        lines.append("```\n" + "\n".join(draw_tree(tree, conversation)) + "\n```\n")
        for node in tree.nodes(conversation):
            parent = f" (after `{short_id(node.parent)}`)" if node.parent else " (root)"
            lines.append(message_markdown(node.message).replace("\n", f"{parent}\n", 1))
    else:
        lines += [message_markdown(m) for m in tree.path(conversation)]
    return "\n".join(lines)


def _summary(message: Message, width: int = 60) -> str:
    text = " ".join(" ".join(block.outline() for block in message.content).split())
    if message.role == "user" and "<system-reminder>" in text:
        # What a harness wrapped around the user's words is shown as such, not as the task.
        task = first_task([message])
        reminders = text.count("<system-reminder>")
        text = f"{task} (+{reminders} system reminder{'s' if reminders > 1 else ''})" if task else f"(system reminder) {text.replace('<system-reminder>', '').strip()}"
    return text if len(text) <= width else text[: width - 3] + "..."


#: Of a run of messages with nothing to mark (no branch, tip or checkpoint), a tree
#: drawing keeps this many at each end and counts the rest on one line.
RUN_ENDS_KEPT = 2


def draw_tree(tree: SessionTree, conversation: str, *, collapse: bool = True, notes: Mapping[str, str] | None = None) -> list[str]:
    """Lines drawing every branch of a conversation; the tip is marked ``<- tip`` (and,
    with several agents, each agent's tip with its name); ``notes`` (message id -> text,
    a compaction's end, say) follow their message's line, which stays shown.

    A run without branches stays in one column; each branch point indents its
    branches, so a long conversation does not walk off the right edge. With
    ``collapse``, the middle of a long run with nothing to mark is one line
    (``… 812 messages …``).
    """
    info = tree.conversation(conversation)
    nodes = tree.nodes(conversation)
    children: dict[str | None, list[Node]] = {}
    for node in nodes:
        children.setdefault(node.parent, []).append(node)
    agents: dict[str | None, list[str]] = {}
    tips = tree.agent_tips(conversation)
    for agent, agent_tip in tips.items():
        agents.setdefault(agent_tip, []).append(agent)
    marks: dict[str | None, list[str]] = {}
    for name, target in tree.labels(conversation).items():
        marks.setdefault(target, []).append(name)

    notes = notes or {}

    def labelled(message_id: str | None) -> str:
        note = f"  {notes[message_id]}" if message_id is not None and message_id in notes else ""
        return "".join(f"  [checkpoint {name}]" for name in marks.get(message_id, ())) + note

    times = [n.message.time for n in nodes if n.message.time is not None]
    span = f"  ({clock(min(times))} to {clock(max(times))} UTC)" if times else ""
    lines = [info.id + (f"  {info.title}" if info.title else "") + span + labelled(None)]
    if info.tip is None:
        lines.append("* (empty)  <- tip")

    def branches(kids: list[Node], prefix: str) -> list[tuple[Node, str, str]]:
        if len(kids) == 1:
            return [(kids[0], prefix, prefix)]
        return [
            (kid, prefix + ("└─" if i == len(kids) - 1 else "├─"), prefix + ("  " if i == len(kids) - 1 else "│ "))
            for i, kid in enumerate(kids)
        ]

    run: list[tuple[str, str]] = []  # (prefix, line) of plain messages in one column, in order

    def end_run() -> None:
        if collapse and len(run) > 2 * RUN_ENDS_KEPT + 1:
            hidden = len(run) - 2 * RUN_ENDS_KEPT
            run[RUN_ENDS_KEPT:-RUN_ENDS_KEPT] = [(run[0][0], f"{run[0][0]}  … {hidden:,} messages …")]
        lines.extend(line for _, line in run)
        run.clear()

    stack = list(reversed(branches(children.get(None, []), "")))
    while stack:  # depth-first without recursion: paths can be thousands of messages long
        node, line_prefix, child_prefix = stack.pop()
        mark = "  <- tip" if node.message.id == info.tip else ""
        if len(tips) > 1 and node.message.id in agents:  # several agents: whose tip is where
            mark += ("  <-" if not mark else "") + f" ({', '.join(agents[node.message.id])})"
        when = f"{clock(node.message.time, date=False)} " if node.message.time is not None else ""
        line = f"{line_prefix}* {when}{node.message.role}: {_summary(node.message)} [{short_id(node.message.id)}]{mark}{labelled(node.message.id)}"
        kids = children.get(node.message.id, [])
        plain = len(kids) == 1 and not mark and node.message.id not in marks and node.message.id not in notes and line_prefix == child_prefix
        if plain:  # (a column changes only at a branch point or a leaf, neither plain)
            run.append((line_prefix, line))
        else:
            end_run()
            lines.append(line)
        stack.extend(reversed(branches(kids, child_prefix)))
    end_run()
    return lines
