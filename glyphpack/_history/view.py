"""A compaction, persisted: the view that stands for the transcript up to a message, so
the request prefix stays byte-identical on the turns that follow and after a restart.

Kept by the workspace beside the transcript (``FolderStore`` and ``PostgresStore``
say where); every compaction is also kept, numbered, for the navigator's compaction
points, and the newest is the one in force. It holds
the compacted messages themselves (snapshot pages as PNG, base64): pages are rendered
from the stored text once per compaction and then reused byte for byte, never redrawn
per turn. A view whose ``covers`` message is no longer in the transcript (a rewind or
a branch went back past it) no longer applies and is ignored.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import HistoryError, StoreError
from .codec import history_from_json, history_to_json, json_bytes
from .messages import Block, Message, Text, ToolResult
from .recall import renamed_refs

if TYPE_CHECKING:
    from .backend import StoreBackend


class Workspace(Protocol):
    """Where views are kept: a ``store.Workspace`` (named by what it offers, so the
    store can write the harnesses' own compactions without an import cycle)."""

    @property
    def backend(self) -> StoreBackend: ...

FORMAT = "glyphpack-view"
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class StoredView:
    """A persisted compaction.

    Attributes:
        covers: id of the last transcript message the view stands for.
        messages: the compacted messages sent in place of the transcript up to ``covers``.
        source: ids of the first and last message a snapshot or summary replaced.
        shape, page_size: the snapshot pages' geometry (pinned for the next compaction).
        pages: snapshot pages in the view.
        tokens: estimated tokens of the view when it was made.
        trigger: what made it (``"proactive"``, ``"recovery"``, ``"/compact"``, ``"/shake"``,
            ``"elision"``: a batch elided below the threshold, with recall on;
            ``"harness"``: the imported session's own harness compacted there).
        report: the ladder's one-line outcome.
        page_text: the text the snapshot pages draw, exactly (stubs and cut results as
            drawn; "" without pages), for a person checking what the model was shown.
    """

    covers: str
    messages: tuple[Message, ...]
    source: tuple[str, str] | None = None
    shape: str | None = None
    page_size: tuple[int, int] | None = None
    pages: int = 0
    tokens: int = 0
    trigger: str = ""
    report: str = ""
    page_text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "covers": self.covers,
            "source": list(self.source) if self.source else None,
            "shape": self.shape,
            "page_size": list(self.page_size) if self.page_size else None,
            "pages": self.pages,
            "tokens": self.tokens,
            "trigger": self.trigger,
            "report": self.report,
            "page_text": self.page_text,
            "messages": history_to_json(self.messages),
        }


def write_view(workspace: Workspace, conversation: str, agent: str, view: StoredView) -> None:
    """Make ``view`` the one in force for the transcript, and keep it in the archive too."""
    workspace.backend.put_view(conversation, agent, json_bytes(view.to_json()))


def read_archive(workspace: Workspace, conversation: str, agent: str) -> list[StoredView]:
    """Every compaction kept for the transcript, oldest first."""
    return [_decoded(where, raw) for where, raw in workspace.backend.views(conversation, agent)]


def archived(workspace: Workspace, conversation: str, agent: str) -> int:
    """How many compactions are kept for the transcript (counted, not read: each holds its pages)."""
    return workspace.backend.count_views(conversation, agent)


def read_view(workspace: Workspace, conversation: str, agent: str) -> StoredView | None:
    """The view in force for the transcript (None: none). A damaged one raises
    ``StoreError`` naming where it is kept."""
    found = workspace.backend.view(conversation, agent)
    return None if found is None else _decoded(*found)


def view_for(workspace: Workspace, conversation: str, agent: str, messages: Sequence[Message]) -> StoredView | None:
    """The compaction that stands for ``messages`` (the transcript, or a path of it): the
    one in force when its ``covers`` is among them; else, after a branch or rewind back
    past it, the newest earlier compaction that still stands for messages of this path
    (made from those very messages), rather than the whole transcript again; else None."""
    in_force = read_view(workspace, conversation, agent)
    kept = {m.id for m in messages}
    if in_force is None or in_force.covers in kept:
        return in_force
    return next((v for v in reversed(read_archive(workspace, conversation, agent)) if v.covers in kept), None)


def renamed_view(view: StoredView, renamed: Mapping[str, str]) -> StoredView:
    """``view`` for a copy of its transcript under new message ids (``renamed``: old id ->
    new id, as a fork makes them): each message as the view has it (an elided result stays
    a stub) under its new id, the message ids its notes' recall refs name renamed with it."""

    def text(block: Text) -> Text:
        return Text(renamed_refs(block.text, renamed))

    def block(b: Block) -> Block:
        if isinstance(b, Text):
            return text(b)
        if isinstance(b, ToolResult):
            return dataclasses.replace(b, content=tuple(text(p) if isinstance(p, Text) else p for p in b.content))
        return b

    def message(m: Message) -> Message:
        return dataclasses.replace(m, id=renamed.get(m.id, m.id), content=tuple(map(block, m.content)))

    source = view.source
    return dataclasses.replace(
        view,
        covers=renamed.get(view.covers, view.covers),
        messages=tuple(map(message, view.messages)),
        source=None if source is None else (renamed.get(source[0], source[0]), renamed.get(source[1], source[1])),
    )


def _decoded(where: str, raw: bytes) -> StoredView:
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != FORMAT_VERSION:
            raise ValueError(f"not a {FORMAT} version {FORMAT_VERSION} file")
        source, size = data.get("source"), data.get("page_size")
        return StoredView(
            covers=str(data["covers"]),
            messages=tuple(history_from_json(data["messages"])),
            source=(str(source[0]), str(source[1])) if source else None,
            shape=data.get("shape"),
            page_size=(int(size[0]), int(size[1])) if size else None,
            pages=int(data.get("pages", 0)),
            tokens=int(data.get("tokens", 0)),
            trigger=str(data.get("trigger", "")),
            report=str(data.get("report", "")),
            page_text=str(data.get("page_text", "")),
        )
    except (ValueError, KeyError, TypeError, IndexError, HistoryError, RecursionError) as exc:
        raise StoreError(f"{where} is damaged ({exc}); delete it to send the full transcript again") from None


def harness_view(messages: tuple[Message, ...], start: str, harness: str) -> StoredView | None:
    """The view a harness's own compaction makes: its later requests carried the
    messages from ``start`` (its summary, or the first kept) on, so the view stands for
    everything before it, keeping only the system prompt. None when ``start`` is not in
    ``messages`` or nothing comes before it."""
    ids = [m.id for m in messages]
    if start not in ids or ids.index(start) == 0:
        return None
    cut = ids.index(start)
    kept = tuple(m for m in messages[:cut] if m.role == "system")
    return StoredView(
        covers=ids[cut - 1], messages=kept, source=(ids[0], ids[cut - 1]), trigger="harness",
        report=f"{harness} compacted here: the {cut - len(kept):,} messages before its summary are not sent (recallable)",
    )


def request_messages(view: StoredView | None, messages: Sequence[Message]) -> tuple[tuple[Message, ...], int]:
    """What the next request carries of stored ``messages`` under ``view`` (the
    compaction in force for them; None: none): the view's messages, then those it does
    not stand for; and how many are the view's (the stable prefix)."""
    if view is None:
        return tuple(messages), 0
    after = [m.id for m in messages].index(view.covers) + 1
    return view.messages + tuple(messages[after:]), len(view.messages)


def compaction_notes(workspace: Workspace, conversation: str) -> dict[str, str]:
    """Every compaction kept for each agent of ``conversation``, as a note on the last
    message it stands for (``export.draw_tree``'s ``notes``): the one in force, the
    earlier ones, and the harness's own (an import's). The CLI's tree and the session
    shell's ``/tree`` draw the same."""
    notes: dict[str, list[str]] = {}
    for stored_conversation, agent in workspace.backend.transcripts():
        if stored_conversation != conversation:
            continue
        in_force = read_view(workspace, conversation, agent)
        stored = workspace.backend.read(conversation, agent)
        if in_force is None or stored is None:
            continue
        ids = [m.id for m in stored.messages]
        for view in read_archive(workspace, conversation, agent):
            if view.covers not in ids:
                continue
            now = "in force" if view.covers == in_force.covers and view.trigger == in_force.trigger else "earlier"
            if view.trigger == "harness":
                text = f"{agent}: the harness compacted here ({now}): the {ids.index(view.covers) + 1:,} messages up to here are not sent"
            else:
                pages = f", {view.pages} page(s)" if view.pages else ""
                text = f"{agent}: {len(view.messages)} messages stand for {ids.index(view.covers) + 1}{pages} ({view.trigger}, {now})"
            notes.setdefault(view.covers, []).append(text)
    return {covers: "<- compacted up to here (" + "; ".join(texts) + ")" for covers, texts in notes.items()}
