"""Moving a workspace between stores (a folder and PostgreSQL, either way), losslessly.

``copy_workspace`` copies every conversation of the tree (each message with its id,
parent, role and time; the tips of the conversation and of each agent; the labels;
where a fork came from), every transcript at its revision, every compaction view in
order and every measured record; then it compares ``workspace_record`` of both sides
and raises if anything differs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from .._errors import StoreError
from .backend import StoredTranscript
from .codec import history_to_json
from .export import export_json
from .store import Workspace
from .tree import displayable


@dataclasses.dataclass(frozen=True)
class CopyReport:
    conversations: int
    messages: int
    transcripts: int
    views: int


def workspace_record(workspace: Workspace) -> dict[str, Any]:
    """Everything a workspace holds, as one JSON-ready value two stores can be compared by:
    every conversation's whole tree, tips and labels; every transcript; every view and
    measured record (parsed, so two encodings of one value compare equal)."""
    tree, backend = workspace.tree, workspace.backend
    conversations = {}
    for info in tree.conversations():
        exported = export_json(tree, info.id, whole_tree=True)
        agent_tips = tree.agent_tips(info.id)  # the main agent first
        conversations[info.id] = exported | {
            "title": displayable(info.title),  # as a copy keeps it (a NUL is no text PostgreSQL keeps)
            "created": info.created, "agent_tips": agent_tips, "labels": tree.labels(info.id),
            "main": next(iter(agent_tips), None),
        }
    transcripts = {}
    for conversation, agent in workspace.transcripts():
        stored = backend.read(conversation, agent)
        if stored is None:  # listed, then deleted by another process: in neither record
            continue
        measured = backend.measured(conversation, agent)
        transcripts[f"{conversation}/{agent}"] = {
            "revision": stored.revision,
            "error": stored.error,
            "checkpoints": dict(stored.checkpoints),
            "messages": history_to_json(stored.messages),
            "views": [json.loads(raw) for _, raw in backend.views(conversation, agent)],
            "measured": json.loads(measured[1]) if measured is not None else None,
        }
    return {"conversations": conversations, "transcripts": transcripts}


def copy_workspace(
    source: Workspace, destination: Workspace, *, progress: Callable[[str], None] | None = None
) -> CopyReport:
    """Copy everything ``source`` holds into ``destination`` (which must be empty), then
    check both hold the same (``StoreError`` naming what differs)."""
    target_tree = destination.tree
    if target_tree.conversations() or destination.transcripts():
        raise StoreError(f"{destination.location} is not empty: copy a workspace only into a new one (nothing was written)")
    messages = 0
    conversations = source.tree.conversations()
    for number, info in enumerate(conversations, 1):
        messages += target_tree.copy_conversation(source.tree, info.id)
        if progress:
            progress(f"conversation {number}/{len(conversations)}: {info.id}")
    pairs = source.transcripts()
    views = 0
    for conversation, agent in pairs:
        stored = source.backend.read(conversation, agent)
        if stored is not None:
            destination.backend.save(conversation, agent, _exactly(stored))
        for _, raw in source.backend.views(conversation, agent):
            destination.backend.put_view(conversation, agent, raw)
            views += 1
        measured = source.backend.measured(conversation, agent)
        if measured is not None:
            destination.backend.put_measured(conversation, agent, measured[1])
    # A save moves its agent's tip to the transcript's end; the tips are the source's.
    for info in conversations:
        target_tree.set_tips(info.id, info.tip, source.tree.agent_tips(info.id))
    before, after = workspace_record(source), workspace_record(destination)
    if before != after:
        differ = sorted(
            key for part in ("conversations", "transcripts")
            for key in set(before[part]) | set(after[part]) if before[part].get(key) != after[part].get(key)
        )
        raise StoreError(f"the copy in {destination.location} differs from {source.location} in: {', '.join(differ)}")
    return CopyReport(len(conversations), messages, len(pairs), views)


def _exactly(stored: StoredTranscript) -> Callable[[StoredTranscript | None], StoredTranscript]:
    def prepare(existing: StoredTranscript | None) -> StoredTranscript:
        if existing is not None:
            raise StoreError("the destination gained a transcript while it was being copied into")
        return stored

    return prepare
