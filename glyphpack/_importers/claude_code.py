"""Claude Code session JSONL, read the way Claude Code writes it.

Every line with a ``uuid`` is a node whose parent is ``parentUuid`` (a compaction's
``compact_boundary`` line points back through ``logicalParentUuid``; when that line is
not in the file, the boundary is joined to the newest message written before it, and
the report says so); the live history is the parent walk from a leaf. One API response
is written as one line per content block sharing ``message.id``: those lines merge into
one assistant message. Each tool result is its own user line: consecutive results gather
into one ``tool`` message. Parallel tool calls, written one line per call with each
result hanging off its own call, are gathered back into one response followed by all of
its results.

``attachment`` lines (hook output, memory files, listings, reminders, queued prompts)
become the user messages Claude Code made of them (``claude_code_attachments``); those
it sends nothing for are counted. Subagents are their own agents: sidechain chains
(``isSidechain``), and the ``agent_progress`` lines 2.1 writes in the main file, one per
subagent message. Each message keeps its line's ``timestamp``. The title is the newest
``custom-title`` (the user's), else ``ai-title``, else the first ``summary``.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from .._history.ids import unique_name
from .._history.imported import ImportedAgent, ImportedSession, Usage
from .._history.messages import Block, Image, Message, Opaque, RedactedThinking, ResultBlock, Text, Thinking, ToolCall, ToolResult
from . import claude_code_attachments
from .base import (
    Tally,
    compaction_ids,
    epoch_seconds,
    image_or_stub,
    jsonl_records,
    measured_usage,
    named_model,
    repair,
    safe_block,
    text_of,
    usage_in,
)

FORMAT = "claude-code"
_MESSAGE_TYPES = ("user", "assistant")


@dataclasses.dataclass
class _Node:
    index: int  # position in the file: the order Claude Code wrote it in
    record: dict[str, Any]
    parent: int | None = None
    children: list[int] = dataclasses.field(default_factory=list)

    @property
    def sidechain(self) -> bool:
        return bool(self.record.get("isSidechain"))

    @property
    def carries_message(self) -> bool:
        """A message the model saw: a user or assistant line, or an attachment it was shown."""
        if self.record.get("type") == "attachment":
            return self.attachment is not None
        return self.record.get("type") in _MESSAGE_TYPES and isinstance(self.record.get("message"), dict)

    @functools.cached_property
    def attachment(self) -> tuple[str, bool] | None:
        """What the model was shown of an attachment line (``claude_code_attachments.shown``)."""
        return claude_code_attachments.shown(self.record.get("attachment")) if self.record.get("type") == "attachment" else None

    @property
    def boundary(self) -> bool:
        return self.record.get("type") == "system" and self.record.get("subtype") == "compact_boundary"


def detect(records: list[dict[str, Any]]) -> bool:
    return any("parentUuid" in r and "uuid" in r for r in records) or any(
        r.get("type") == "summary" and "leafUuid" in r for r in records
    )


def read(path: Path, data: bytes, *, file_order: bool = False) -> ImportedSession:
    """The session in ``data``, along its newest main-chain leaf. ``file_order``: the
    lines in the order written are the path (a subagent's own file, whose first lines
    may hang off its session's)."""
    tally = Tally()
    nodes: list[_Node] = []
    by_uuid: dict[str, list[int]] = {}
    title = custom_title = ai_title = ""
    progress: dict[str, _ProgressAgent] = {}
    for _, record in jsonl_records(data, tally):
        if record.get("type") == "summary":
            title = title or str(record.get("summary") or "")
            continue
        if record.get("type") == "custom-title" and isinstance(record.get("customTitle"), str):
            custom_title = record["customTitle"]  # the user's own name for it, the newest written
            continue
        if record.get("type") == "ai-title" and isinstance(record.get("aiTitle"), str):
            ai_title = record["aiTitle"]
            continue
        uuid = record.get("uuid")
        if not isinstance(uuid, str):
            tally.skip(f"{record.get('type', 'untyped')} lines (no message)")
            continue
        node = _Node(len(nodes), record)
        nodes.append(node)
        by_uuid.setdefault(uuid, []).append(node.index)
        if _progress_of(record, progress):
            continue
        if record.get("type") == "attachment" and not node.carries_message:
            tally.skip("attachment lines the model is not shown")
        elif not node.carries_message and record.get("type") not in ("system",):
            tally.skip(f"{record.get('type', 'untyped')} lines (no message)")
        if node.boundary:
            tally.compactions += 1
    def parent_uuid(node: _Node) -> str | None:
        value = node.record.get("parentUuid") or node.record.get("logicalParentUuid")
        return value if isinstance(value, str) else None

    linked = any(parent_uuid(n) in by_uuid for n in nodes)
    newest_message: int | None = None  # the newest main-chain message line so far, in file order
    for node in nodes:
        if not linked or file_order:  # older or hand-made files link no line to one in the file: file order is the path
            node.parent = node.index - 1 if node.index else None
            if node.parent is not None:
                nodes[node.parent].children.append(node.index)
            continue
        wanted = parent_uuid(node)
        candidates = by_uuid.get(wanted, []) if wanted is not None else []
        # The nearest earlier line with that uuid (a file that reuses uuids must not
        # make a node its own ancestor); a later one only if there is no earlier.
        earlier = [i for i in candidates if i < node.index]
        parent = earlier[-1] if earlier else next((i for i in candidates if i != node.index), None)
        if parent is not None and parent > node.index:
            parent = None  # forward pointers could close a cycle: treat as a root
        if parent is None and node.boundary and wanted is not None:
            # A compaction whose last message before it is not in the file (Claude Code
            # does not always write it): join it to the newest message written before it.
            if newest_message is not None:
                parent = newest_message
                tally.repair("compaction boundaries joined to the message written before them (the one they name is not in the file)")
            else:
                tally.assume("the session continues another file: its first compaction's earlier messages are not in this one")
        node.parent = parent
        if parent is not None:
            nodes[parent].children.append(node.index)
        if node.carries_message and not node.sidechain:
            newest_message = node.index

    def leaves(sidechain: bool) -> list[int]:
        return [
            n.index
            for n in nodes
            if not n.children and n.sidechain == sidechain and any(nodes[i].carries_message for i in _walk(nodes, n.index))
        ]

    main_leaves = leaves(False)
    main = max(main_leaves, default=-1)
    calls_of = _response_calls(nodes)

    def path_to(leaf: int) -> list[int]:
        return _with_parallel_results(nodes, _walk(nodes, leaf), calls_of)

    agents: list[ImportedAgent] = []
    main_path = path_to(main) if main >= 0 else []
    if main >= 0:
        messages, usage, compactions = _history(nodes, main_path, tally)
        agents.append(ImportedAgent("main", tuple(messages), usage, compactions, _model_on(nodes, main_path)))
    # A leaf is another branch only when it holds a message the main path does not: a
    # hook's attachment hanging off a call, or a parallel call's result taken in above,
    # is not a branch.
    kept = set(main_path)
    branches = tuple(
        tuple(_history(nodes, path_to(other), Tally())[0])
        for other in main_leaves
        if other != main and any(nodes[i].carries_message and i not in kept for i in _walk(nodes, other))
    )
    # Subagents: each sidechain root's newest leaf is one agent's history.
    roots: dict[int, int] = {}
    for index in leaves(True):
        root = _walk(nodes, index)[0]
        roots[root] = max(roots.get(root, -1), index)
    for number, (_, sub_leaf) in enumerate(sorted(roots.items()), start=1):
        name = str(nodes[sub_leaf].record.get("agentId") or f"sidechain-{number}")
        sidechain = path_to(sub_leaf)
        messages, usage, compactions = _history(nodes, sidechain, tally)
        if messages:
            agents.append(ImportedAgent(unique_name(name, {a.name for a in agents}), tuple(messages), usage, compactions, _model_on(nodes, sidechain)))
    for name, sub_path in subagent_files(path).items():
        if any(a.name == name for a in agents):
            continue
        try:
            sub_data = sub_path.read_bytes()
        except OSError:
            tally.skip("subagent files that cannot be read")
            continue
        # Its own file holds the whole subagent (its progress lines in this file carry its
        # calls and results, not all of its text).
        tally.repair(f"subagents read from their own file in {sub_path.parent.name}/")
        for sub_agent in read(sub_path, sub_data, file_order=True).agents:
            agents.append(dataclasses.replace(sub_agent, name=unique_name(name, {a.name for a in agents})))
        if name in progress:
            tally.skip("agent_progress lines of a subagent read from its own file", len(progress.pop(name).nodes))
    for name, sub in progress.items():
        if any(a.name == name for a in agents):  # the same subagent's sidechain lines: already read
            tally.skip("agent_progress lines of a subagent also written as sidechain lines", len(sub.nodes))
            continue
        every = [n.index for n in sub.nodes]
        messages, usage, compactions = _history(sub.nodes, every, tally)
        if messages:
            agents.append(ImportedAgent(unique_name(name, {a.name for a in agents}), tuple(messages), usage, compactions, _model_on(sub.nodes, every)))
    return ImportedSession(custom_title or ai_title or title, tuple(agents), branches, tally.report(FORMAT, agents, len(branches)))


def subagent_files(path: Path) -> dict[str, Path]:
    """Claude Code 2.1 writes each subagent of ``SESSION.jsonl`` (and its compaction
    summarizer, ``agent-acompact-*``) to ``SESSION/subagents/agent-ID.jsonl``: by agent id."""
    folder = path.parent / path.stem / "subagents"
    if path.suffix != ".jsonl" or not folder.is_dir():
        return {}
    return {p.stem.removeprefix("agent-"): p for p in sorted(folder.glob("agent-*.jsonl")) if p.is_file()}


def _walk(nodes: list[_Node], leaf: int) -> list[int]:
    """Node indices from the root to ``leaf``."""
    path, seen = [], set()
    current: int | None = leaf
    while current is not None and current not in seen:
        seen.add(current)
        path.append(current)
        current = nodes[current].parent
    return path[::-1]


def _response_calls(nodes: list[_Node]) -> dict[object, set[str]]:
    """Each API response's (``message.id``) tool call ids, over all its lines."""
    calls_of: dict[object, set[str]] = {}
    for node in nodes:
        if node.record.get("type") == "assistant" and node.carries_message and node.record["message"].get("id") is not None:
            calls_of.setdefault(node.record["message"]["id"], set()).update(_call_ids(node))
    return calls_of


def _with_parallel_results(nodes: list[_Node], path: list[int], calls_of: dict[object, set[str]]) -> list[int]:
    """``path`` with parallel tool calls and their results taken in. Claude Code writes
    one assistant line per ``tool_use`` of a response, each the parent of the next, and
    hangs each call's result off the call's own line; the next turn goes on from one of
    those results. The walk back from the leaf passes through one chain only: the other
    calls of the response and the other results are side leaves. A side part holding
    nothing but lines of the same response and results of its calls is taken in: its
    calls where the response is, its results right after the response's last line, where
    the API had them (``calls_of``: ``_response_calls``)."""
    on_path = set(path)
    answered = {call_id for i in path for call_id in _result_ids(nodes[i])}
    out: list[int] = []
    pending: list[int] = []
    response: object = None
    for index in path:
        node = nodes[index]
        is_assistant = node.record.get("type") == "assistant" and node.carries_message
        same_response = is_assistant and response is not None and node.record["message"].get("id") == response
        if node.carries_message and not same_response:
            out.extend(pending)
            pending = []
            response = node.record["message"].get("id") if is_assistant else None
        out.append(index)
        if not is_assistant or response is None:
            continue
        for child in node.children:
            if child in on_path:
                continue
            part = sorted([child, *_below(nodes, child)])
            carriers = [i for i in part if nodes[i].carries_message]
            lines = [i for i in carriers if nodes[i].record.get("type") == "assistant" and nodes[i].record["message"].get("id") == response]
            results = [i for i in carriers if i not in lines and (_result_ids(nodes[i]) or nodes[i].attachment is not None)]
            answers = [call_id for i in results for call_id in _result_ids(nodes[i])]
            if (answers and len(lines) + len(results) == len(carriers) and set(answers) <= calls_of[response]
                    and len(answers) == len(set(answers)) and not set(answers) & answered):
                out.extend(lines)
                pending.extend(results)
                answered.update(answers)
                on_path.update(part)
    return out + pending


def _call_ids(node: _Node) -> set[str]:
    content = node.record["message"].get("content")
    return {b["id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str)} if isinstance(content, list) else set()


def _result_ids(node: _Node) -> set[str]:
    """The call ids a user line answers (empty unless it holds only results)."""
    if node.record.get("type") != "user" or not node.carries_message:
        return set()
    content = node.record["message"].get("content")
    if not isinstance(content, list) or not content:
        return set()
    if not all(isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str) for b in content):
        return set()
    return {b["tool_use_id"] for b in content}


def _below(nodes: list[_Node], index: int) -> list[int]:
    """Every node under ``index`` (not itself)."""
    found, stack = [], list(nodes[index].children)
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(nodes[current].children)
    return found


def _model_on(nodes: list[_Node], path: list[int]) -> str | None:
    """The model of the newest response along ``path`` that names one."""
    for index in reversed(path):
        record = nodes[index].record
        message = record.get("message")
        if record.get("type") == "assistant" and isinstance(message, dict) and (model := named_model(message.get("model"))):
            return model
    return None


def _history(nodes: list[_Node], path: list[int], tally: Tally) -> tuple[list[Message], tuple[Usage, ...], tuple[str, ...]]:
    """The messages along a path: responses merged by ``message.id``, tool results
    gathered into ``tool`` messages, attachments as the user messages the model saw
    (one written between a call and its result follows the result, where Claude Code
    sends it), then repaired; with the usage records and the compactions' first messages."""
    messages: list[Message] = []
    usage: list[Usage] = []
    starts: list[int] = []
    context_start = 0  # after a compaction, requests carry the summary and what follows
    response_id: object = None
    waiting: set[str] = set()  # calls of the newest response still without their result
    held: list[Message] = []  # attachments written while calls wait for results

    def release() -> None:
        messages.extend(held)
        held.clear()

    for index in path:
        node = nodes[index]
        if node.boundary:
            release()
            context_start = len(messages)
            starts.append(context_start)
        if not node.carries_message:
            continue
        record = node.record
        ids = f"{record.get('uuid')}-{index}"
        time = epoch_seconds(record.get("timestamp"))
        if node.attachment is not None:
            text, own_words = node.attachment
            attached = Message("user", (Text(text),), id=f"{ids}-attachment" if not own_words else ids, time=time)
            (held if waiting else messages).append(attached)
            continue
        message = record["message"]
        blocks = _blocks(message.get("content"), tally)
        if record["type"] == "assistant":
            release()
            same_response = message.get("id") is not None and message.get("id") == response_id and messages
            if same_response and messages[-1].role == "assistant":
                messages[-1] = messages[-1].with_content(messages[-1].content + tuple(blocks))
            elif blocks:
                messages.append(Message("assistant", tuple(blocks), id=ids, time=time))
                waiting = set()
            waiting |= {b.id for b in blocks if isinstance(b, ToolCall)}
            response_id = message.get("id")
            measured = measured_usage(
                context_start, len(messages) - 1, message.get("usage"),
                ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"),
                ("cache_read_input_tokens",), ("cache_creation_input_tokens",),
            )
            if measured and messages and messages[-1].role == "assistant":
                usage.append(measured)
            continue
        response_id = None
        results = tuple(b for b in blocks if isinstance(b, ToolResult))
        others = tuple(b for b in blocks if not isinstance(b, ToolResult))
        if results:
            if messages and messages[-1].role == "tool":
                messages[-1] = messages[-1].with_content(messages[-1].content + results)
            else:
                messages.append(Message("tool", results, id=f"{ids}-results", time=time))
            waiting -= {b.call_id for b in results}
        if others:
            waiting = set()
            release()
            messages.append(Message("user", others, id=ids, time=time))
        if not waiting:
            release()
    release()
    repaired = repair(_pair_anonymous_results(messages, tally), tally)
    return repaired, usage_in(repaired, messages, usage), compaction_ids(repaired, messages, starts)


@dataclasses.dataclass
class _ProgressAgent:
    """A subagent as its ``agent_progress`` lines carry it: one message per line."""

    prompt: str
    nodes: list[_Node] = dataclasses.field(default_factory=list)
    seen: set[object] = dataclasses.field(default_factory=set)


def _progress_of(record: dict[str, Any], agents: dict[str, _ProgressAgent]) -> bool:
    """Take a subagent's message from an ``agent_progress`` line into ``agents`` (by
    ``agentId``, else the calling ``parentToolUseID``). True when the line was one."""
    data = record.get("data")
    if record.get("type") != "progress" or not isinstance(data, dict) or data.get("type") != "agent_progress":
        return False
    name = data.get("agentId") or record.get("parentToolUseID")
    nested = data.get("message")
    if not isinstance(name, str) or not isinstance(nested, dict):
        return True
    agent = agents.setdefault(name, _ProgressAgent(str(data.get("prompt") or "")))
    key = nested.get("uuid") or id(nested)
    if key in agent.seen:  # written again as the subagent went on
        return True
    agent.seen.add(key)
    line = nested if "timestamp" in nested else {**nested, "timestamp": record.get("timestamp")}
    if not agent.nodes and agent.prompt and line.get("type") != "user":
        # The prompt the subagent was started with, when its first line is not it.
        agent.nodes.append(_Node(0, {"type": "user", "message": {"role": "user", "content": agent.prompt},
                                     "uuid": f"{name}-prompt", "timestamp": record.get("timestamp")}))
    agent.nodes.append(_Node(len(agent.nodes), line))
    return True


#: The id prefix of a call the file wrote without one.
ANONYMOUS = "anonymous-"


def _pair_anonymous_results(messages: list[Message], tally: Tally) -> list[Message]:
    """Older files write a ``tool_use`` without an id and its ``tool_result`` without
    one: give each such call an id (from its message's id and its place there, so a
    second import of the file gives the same ids and syncs as unchanged) and pair the
    next anonymous result with it."""
    out: list[Message] = []
    waiting: list[str] = []
    for message in messages:
        content: list[Block] = []
        for place, block in enumerate(message.content):
            if isinstance(block, ToolCall) and block.id.startswith(ANONYMOUS):
                block = dataclasses.replace(block, id=f"{ANONYMOUS}{message.id}-{place}")
                waiting.append(block.id)
            if isinstance(block, ToolResult) and block.call_id == "" and waiting:  # else repair keeps it as the user's text
                tally.repair("tool results without a call id paired with the call before them")
                block = dataclasses.replace(block, call_id=waiting.pop(0))
            content.append(block)
        out.append(message.with_content(tuple(content)) if tuple(content) != message.content else message)
    return out


def _blocks(content: object, tally: Tally) -> list[Block]:
    if isinstance(content, str):
        return [Text(content)] if content else []
    if not isinstance(content, list):
        tally.skip("message contents that are neither text nor blocks")
        return []
    blocks = []
    for item in content:
        block = _block(item, tally) if isinstance(item, dict) else None
        if block is None and not isinstance(item, dict):
            tally.skip("content items that are not objects")
        if block is not None:
            blocks.append(block)
    return blocks


def _block(item: dict[str, Any], tally: Tally) -> Block | None:
    kind = item.get("type")
    if kind == "text":
        return safe_block(lambda: Text(item["text"]), tally, "malformed text blocks")
    if kind == "image":
        source: dict[str, Any] = item["source"] if isinstance(item.get("source"), dict) else {}
        if source.get("type") == "base64":
            return image_or_stub(source.get("media_type"), source.get("data"), tally)
        return safe_block(lambda: _url_image(source), tally, "images without data or a URL")
    if kind == "tool_use":
        if not item.get("id"):
            tally.repair("tool calls without an id given one")
            item = item | {"id": ANONYMOUS}  # named by _pair_anonymous_results, from its message
        arguments: dict[str, Any] = item["input"] if isinstance(item.get("input"), dict) else {"input": item.get("input")}
        return safe_block(lambda: ToolCall(item["id"], str(item.get("name") or "tool"), arguments), tally, "malformed tool calls")
    if kind == "tool_result":
        parts = _result_content(item.get("content"), tally)
        call_id: str = item["tool_use_id"] if isinstance(item.get("tool_use_id"), str) else ""
        return safe_block(lambda: ToolResult(call_id, tuple(parts), bool(item.get("is_error"))), tally, "malformed tool results")
    if kind == "thinking":
        signature = item.get("signature") if isinstance(item.get("signature"), str) else None
        return safe_block(lambda: Thinking(str(item.get("thinking") or ""), signature), tally, "malformed thinking")
    if kind == "redacted_thinking":
        return safe_block(lambda: RedactedThinking(item["data"]), tally, "malformed redacted thinking")
    return Opaque(str(kind), item)


def _url_image(source: dict[str, Any]) -> Block:
    return Image(str(source.get("media_type") or "image/png"), ref=source.get("url") or source["file_id"])


def _result_content(content: object, tally: Tally) -> list[ResultBlock]:
    if isinstance(content, str) or content is None:
        return [Text(content or "")]
    parts: list[ResultBlock] = []
    for item in content if isinstance(content, list) else [content]:
        block = _block(item, tally) if isinstance(item, dict) else Text(text_of(item))
        if block is None:
            continue
        # A result holds text and images; anything else is kept as its text.
        parts.append(block if isinstance(block, (Text, Image)) else Text(text_of(item)))
    return parts
