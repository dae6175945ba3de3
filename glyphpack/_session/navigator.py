"""A workspace as one self-contained HTML file: the conversations' trees (branches,
forks, rewinds, each agent's tip), the transcripts beside them, and the compaction
points with their pages and the source text they stand for.

No network and no external assets: the data is one JSON document inside the page
(every ``<``, ``>`` and ``&`` escaped, so no message can close the script element),
and the page's own script builds the DOM from it with ``textContent`` only: no
message text is ever parsed as HTML. Each distinct image is stored once.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import textwrap
from collections.abc import Mapping
from importlib import resources
from typing import Any

from .._compaction.rungs import DROPPED_MARK, ELIDED_MARK
from .._errors import StoreError
from .._history.messages import Block, Image, Message, Opaque, RedactedThinking, Text, Thinking, ToolCall, ToolResult, first_typed
from .._history.recall import hinted_refs, range_ref
from .._history.store import Workspace
from .._history.view import StoredView, read_archive
from .._types import public

Json = dict[str, Any]

#: Media types an exported image may claim (anything else is shown as a reference).
_IMAGE_TYPE = re.compile(r"image/[a-z0-9.+-]{1,40}")


class _Images:
    """Each distinct image once, keyed by a hash of its bytes."""

    def __init__(self) -> None:
        self.table: dict[str, Json] = {}

    def key(self, block: Image) -> str | None:
        if block.data is None or not _IMAGE_TYPE.fullmatch(block.media_type):
            return None
        key = hashlib.sha256(block.data).hexdigest()[:20]
        if key not in self.table:
            self.table[key] = {"m": block.media_type, "d": base64.b64encode(block.data).decode("ascii")}
        return key


def _block(block: Block, images: _Images) -> Json:
    if isinstance(block, Text):
        return {"k": "text", "x": block.text}
    if isinstance(block, Image):
        key = images.key(block)
        return {"k": "image", "i": key} if key else {"k": "image", "ref": str(block.ref or block.media_type)}
    if isinstance(block, ToolCall):
        out = {"k": "call", "n": block.name, "id": block.id, "label": call_label(block), "a": arguments_text(block.arguments)}
        prompt = block.arguments.get("prompt")
        if isinstance(prompt, str):  # a subagent's task (Claude Code's Task and Agent calls): its transcript nests here
            out["p"] = prompt
            named = [block.arguments.get(key) for key in ("description", "subagent_type")]
            out["d"] = " · ".join(n.strip() for n in named if isinstance(n, str) and n.strip())  # what the subagent is called by
        return out
    if isinstance(block, ToolResult):
        keys = [k for k in (images.key(i) for i in block.images()) if k]
        return {"k": "result", "id": block.call_id, "e": block.is_error, "x": block.text, "imgs": keys}
    if isinstance(block, Thinking):
        return {"k": "thinking", "x": block.text}
    if isinstance(block, RedactedThinking):
        return {"k": "thinking", "x": "[redacted thinking]"}
    if isinstance(block, Opaque):
        return {"k": "opaque", "n": block.kind}
    return {"k": "opaque", "n": type(block).__name__}


#: Longest call label shown (a command can run to pages).
LABEL_CHARS = 160


def call_label(call: ToolCall) -> str:
    """The call by what it does, on one line: ``$ ls -la`` for a command, else the tool's
    name and its key argument (``Read /src/a.py``, ``Grep TODO``, ``WebFetch https://…``)."""
    key, value = call.key_argument()
    value = " ".join(value.split())
    label = f"$ {value}" if key in ("command", "cmd") else f"{call.name} {value}".strip()
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def arguments_text(arguments: Mapping[str, Any]) -> str:
    """A call's arguments as a person reads them: one ``name: value`` per argument, text
    as it is (an edit's new text with its real line breaks, not ``\\n``), anything else
    as indented JSON."""
    lines = []
    for name, value in arguments.items():
        if isinstance(value, str):
            lines.append(f"{name}: {value}" if "\n" not in value else f"{name}:\n" + textwrap.indent(value.rstrip("\n"), "    ", lambda _: True))
        else:
            lines.append(f"{name}: " + json.dumps(value, indent=2, ensure_ascii=False))
    return "\n".join(lines)


def _stub_counts(texts: list[str]) -> Json:
    return {"elided": sum(t.count(ELIDED_MARK) for t in texts), "dropped": sum(t.count(DROPPED_MARK) for t in texts)}


def _compaction(number: int, conversation: str, agent: str, view: StoredView, originals: dict[str, Message], images: _Images) -> Json:
    """One compaction as the navigator shows it: what the view sends as text (verbatim
    messages, and messages with stubs in them), the pages with the exact text they draw
    and the stubs in it, the notes sent with them, and the stored range they stand for."""
    pages: list[str] = []
    notes: list[str] = []
    elided: list[str] = []
    sent: list[str] = []
    for message in view.messages:
        original = originals.get(message.id)
        if original is None:  # made by the compaction: a snapshot's pages, a summary
            pages += [k for k in (images.key(i) for i in message.images) if k]
            notes.append(message.text)
        elif original != message:
            elided.append(message.id)
            sent += [message.text, *(c.arguments_json for c in message.tool_calls)]
    return {
        "n": number, "conv": conversation, "agent": agent, "covers": view.covers, "trigger": view.trigger,
        "report": view.report, "shape": view.shape, "pages": pages, "notes": notes, "elided": elided,
        "source": list(view.source) if view.source else None, "page_text": view.page_text,
        "stubs_sent": _stub_counts(sent), "stubs_on_pages": _stub_counts([view.page_text]),
        "verbatim": sum(1 for m in view.messages if originals.get(m.id) == m),
        # what recall brings back: each stub's and note's ref, and the whole range's
        "refs": [ref for ref, _ in hinted_refs(view.messages)] + ([range_ref(*view.source)] if view.source else []),
    }


def workspace_data(workspace: Workspace, conversation: str | None = None) -> Json:
    """The navigator's data: conversations, every tree node, images, compactions."""
    tree = workspace.tree
    conversations = tree.conversations()
    if conversation is not None:
        if conversation not in {c.id for c in conversations}:
            known = ", ".join(c.id for c in conversations) or "none"
            raise StoreError(f"no conversation {conversation!r} in {workspace.location} (conversations: {known})")
        chosen = {conversation} | {c.id for c in conversations if c.forked_from == conversation}
        conversations = [c for c in conversations if c.id in chosen]
    images = _Images()
    nodes: list[Json] = []
    out_conversations: list[Json] = []
    compactions: list[Json] = []
    for info in conversations:
        originals: dict[str, Message] = {}
        for node in tree.nodes(info.id):
            originals[node.message.id] = node.message
            nodes.append({"id": node.message.id, "p": node.parent, "c": info.id, "r": node.message.role,
                          "t": node.message.time, "b": [_block(b, images) for b in node.message.content]})
        agents = tree.agent_tips(info.id)
        path = tree.path_to(info.tip)
        typed = first_typed(path)
        out_conversations.append({
            "id": info.id, "title": info.title, "tip": info.tip, "agents": agents, "labels": tree.labels(info.id),
            "forked_from": info.forked_from, "forked_at": info.forked_at,
            # where the page opens: what the person typed first, past the harness's wrappers
            "first_prompt": path[typed[0]].id if typed is not None and typed[0] > 0 else None,
        })
        for agent in agents:
            for number, view in enumerate(read_archive(workspace, info.id, agent), 1):
                compactions.append(_compaction(number, info.id, agent, view, originals, images))
    return {"workspace": workspace.name, "conversations": out_conversations, "nodes": nodes,
            "images": images.table, "compactions": compactions}


def _script_json(data: Json) -> str:
    """JSON that cannot end the script element it sits in, nor open a comment."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@functools.cache
def asset(name: str) -> str:
    """A file of the navigator's pages (``navigator/``: their HTML, style and scripts), read once."""
    return (resources.files("glyphpack") / "_session" / "navigator" / name).read_text(encoding="utf-8")


@public
def export_html(workspace: Workspace, conversation: str | None = None) -> str:
    """The workspace (or one conversation and its forks) as one self-contained HTML page."""
    page, style, script = asset("navigator.html"), asset("navigator.css"), asset("navigator.js")
    data = _script_json(workspace_data(workspace, conversation))
    title = f"glyphpack: {workspace.name}" + (f" / {conversation}" if conversation else "")
    escaped_title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    values = {"@@STYLE@@": style, "@@TITLE@@": escaped_title, "@@DATA@@": data, "@@SCRIPT@@": script}
    # One pass: what is put in is never scanned for markers again.
    return re.sub("|".join(map(re.escape, values)), lambda m: values[m.group()], page)
