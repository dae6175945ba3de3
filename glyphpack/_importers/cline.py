"""Cline, Roo Code and Kilo Code task histories: what the VS Code extensions write per
task, ``<global storage>/<extension>/tasks/<task id>/api_conversation_history.json``.

The file is the Anthropic ``messages`` list the extension sends, with its own keys:
Cline adds ``modelInfo`` (``modelId``) and ``metrics`` (``tokens``: ``prompt``, the
uncached input, and ``cached``, the cache's reads and writes together) to each answer;
Roo Code and Kilo Code add ``ts`` (milliseconds) to each message and mark the summary
their context condensing wrote with ``isSummary``. Tools are called with ``tool_use``
blocks, or (the extensions' older protocol, Roo Code up to 3.28) in XML in the answer's
text, ``<read_file><path>x.py</path></read_file>``, read as the call it is; and answered
either with ``tool_result`` blocks or, as Cline writes them, with a text block per call
in the next user message: ``[read_file for 'x.py'] Result:`` and the
output, or ``Tool [name] was not executed because ...``; those text blocks are read as
the results they are, in the order of the calls.

Beside it, ``ui_messages.json`` is what the extension showed: one ``api_req_started``
entry per request, with its time (``ts``) and its counts (``tokensIn``, ``cacheWrites``,
``cacheReads``); when there is one per answer, requests and answers are paired in order
for the messages' times and the measured input. ``task_metadata.json`` names the model
when the answers do not.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .._errors import HistoryError
from .._history.imported import ImportedAgent, ImportedSession, Usage
from .._history.messages import Message, title_from
from .._wire.anthropic import from_anthropic
from .base import Tally, compaction_ids, count_at, epoch_seconds, named_model, repair, usage_in

FORMAT = "cline"
#: The file each task folder holds; the folder's name is the task's id.
HISTORY_FILE = "api_conversation_history.json"
_TASK_TAGS = re.compile(r"</?task>")
#: The words a result that failed opens with, after its ``[tool ...] Result:`` line.
_FAILED = ("The tool execution failed", "The user denied this operation", "Error ")


def detect(document: object) -> bool:
    if not isinstance(document, list) or not document or not all(isinstance(m, dict) for m in document):
        return False
    if any(m.get("role") not in ("user", "assistant") or "content" not in m for m in document):
        return False
    marked = any(isinstance(m.get("modelInfo"), dict) or (isinstance(m.get("ts"), int) and not isinstance(m.get("ts"), bool)) for m in document)
    return marked or _first_text(document[0]).startswith("<task>")


def read(path: Path, document: list[dict[str, Any]]) -> ImportedSession:
    tally = Tally()
    requests = _requests(path.parent / "ui_messages.json", document, tally)
    messages: list[Message] = []
    usage: list[Usage] = []
    summaries: list[int] = []
    model: str | None = None
    calls: list[tuple[str, str]] = []  # (id, name) of the last answer's calls no tool_result answered
    answers = 0
    for index, raw in enumerate(document):
        if raw["role"] == "assistant":
            raw = _xml_call(raw, f"cline-{index}-call", document[index + 1] if index + 1 < len(document) else None, tally)
            calls = [(b["id"], str(b.get("name"))) for b in _blocks(raw) if b.get("type") == "tool_use" and isinstance(b.get("id"), str)]
            model = named_model(_object(raw.get("modelInfo")).get("modelId")) or model
        else:
            raw = _results_as_blocks(raw, calls, tally)
            calls = []
        request = requests[answers] if requests and raw["role"] == "assistant" else None
        time = epoch_seconds(raw.get("ts")) or _time(requests, answers, raw["role"])
        if raw.get("isSummary") is True:
            summaries.append(len(messages))
            tally.compactions += 1
        try:
            read_parts = from_anthropic([{"role": raw["role"], "content": raw["content"]}])
        except HistoryError:
            tally.skip("malformed messages")
            continue
        for part, message in enumerate(read_parts):
            messages.append(Message(message.role, message.content, id=f"cline-{index}" + (f".{part}" if part else ""), time=time))
        if raw["role"] == "assistant":
            measured = _measured(request, raw.get("metrics"), summaries[-1] if summaries else 0, len(messages) - 1)
            if measured:
                usage.append(measured)
            answers += 1
    repaired = repair(messages, tally)
    model = model or _metadata_model(path.parent / "task_metadata.json")
    agents = (ImportedAgent("main", tuple(repaired), usage_in(repaired, messages, usage), compaction_ids(repaired, messages, summaries), model),)
    return ImportedSession(_title(document), agents, (), tally.report(FORMAT, agents, 0))


#: The tools Cline, Roo Code and Kilo Code call in XML in the answer's text (their
#: protocol before native tool calls): ``<read_file><path>a.py</path></read_file>``.
XML_TOOLS = (
    "execute_command", "read_file", "write_to_file", "apply_diff", "insert_content", "search_and_replace", "search_files", "list_files",
    "list_code_definition_names", "codebase_search", "browser_action", "use_mcp_tool", "access_mcp_resource", "ask_followup_question",
    "attempt_completion", "switch_mode", "new_task", "update_todo_list", "fetch_instructions", "run_slash_command", "generate_image",
    "replace_in_file", "plan_mode_respond", "load_mcp_documentation", "condense", "new_rule", "report_bug", "web_fetch",
)
_XML_TOOL = re.compile(rf"<({'|'.join(XML_TOOLS)})>")
#: Parameters that hold free text (a file's content, a diff): read to their last closing tag.
_FREE_TEXT = ("content", "diff", "result", "question", "message", "args", "todos", "follow_up", "text")


def _xml_call(raw: dict[str, Any], call_id: str, following: dict[str, Any] | None, tally: Tally) -> dict[str, Any]:
    """An answer that calls its tool in XML in its text (and no ``tool_use`` block), with
    that call made a ``tool_use`` block (its parameters as strings) after the text before
    it; only when the next user message answers a call of that name, as the extension
    writes it (``[name for ...] Result:``), or the answer is the task's last (the session
    ended while the tool ran: repair gives it the stand-in result). Any other answer as
    it is."""
    blocks = _blocks(raw) if isinstance(raw.get("content"), list) else [{"type": "text", "text": raw.get("content")}]
    if any(b.get("type") == "tool_use" for b in blocks):
        return raw
    texts = [i for i, b in enumerate(blocks) if b.get("type") == "text" and isinstance(b.get("text"), str)]
    answer = _first_text(following) if following is not None else None
    for position in reversed(texts):
        text = str(blocks[position]["text"])
        found = _XML_TOOL.search(text)
        if found is None or (answer is not None and not _answers(answer, found.group(1))):
            continue
        name = found.group(1)
        end = text.rfind(f"</{name}>")
        if end < found.end():
            continue
        call = {"type": "tool_use", "id": call_id, "name": name, "input": _xml_parameters(text[found.end() : end])}
        before, after = text[: found.start()].rstrip(), text[end + len(name) + 3 :].strip()
        replaced = [*([{"type": "text", "text": before}] if before else []), call, *([{"type": "text", "text": after}] if after else [])]
        tally.repair("tool calls read from the XML in the answer's text")
        return raw | {"content": [*blocks[:position], *replaced, *blocks[position + 1 :]]}
    return raw


def _xml_parameters(body: str) -> dict[str, str]:
    """``<name>value</name>`` pairs of an XML tool call's body, values stripped of the
    newline the model puts around them; a free-text value read to its last closing tag
    (a file's content may hold tags of its own)."""
    out: dict[str, str] = {}
    position = 0
    opening = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)>")
    while (found := opening.search(body, position)) is not None:
        name = found.group(1)
        close = f"</{name}>"
        end = body.rfind(close) if name in _FREE_TEXT else body.find(close, found.end())
        if end < 0:
            break
        value = body[found.end() : end]
        out[name] = value[1:] if value.startswith("\n") else value
        out[name] = out[name][:-1] if out[name].endswith("\n") else out[name]
        position = end + len(close)
    return out


def _blocks(raw: dict[str, Any]) -> list[dict[str, Any]]:
    content = raw.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _first_text(raw: dict[str, Any]) -> str:
    content = raw.get("content")
    if isinstance(content, str):
        return content
    return next((b["text"] for b in _blocks(raw) if b.get("type") == "text" and isinstance(b.get("text"), str)), "")


def _results_as_blocks(raw: dict[str, Any], calls: list[tuple[str, str]], tally: Tally) -> dict[str, Any]:
    """A user message with each of ``calls`` not answered by a ``tool_result`` block
    answered by its text block (``[name ...] Result:`` or ``Tool [name] was not
    executed``), taken in the calls' order and made a ``tool_result`` block."""
    blocks = _blocks(raw) if isinstance(raw.get("content"), list) else [{"type": "text", "text": raw.get("content")}]
    answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
    waiting = [(call_id, name) for call_id, name in calls if call_id not in answered]
    out: list[dict[str, Any]] = []
    for block in blocks:
        text = block.get("text")
        if waiting and block.get("type") == "text" and isinstance(text, str) and _answers(text, waiting[0][1]):
            call_id, _ = waiting.pop(0)
            out.insert(sum(b["type"] == "tool_result" for b in out), {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": _failed(text)})
            tally.repair("tool results read from their text blocks")
        else:
            out.append(block)
    return raw | {"content": out}


def _answers(text: str, name: str) -> bool:
    """Whether ``text`` is the result block Cline writes for a call of ``name``."""
    return text.startswith((f"[{name} for ", f"[{name}] Result:", f"Tool [{name}] "))


def _failed(text: str) -> bool:
    if text.startswith("Tool ["):
        return True  # "was not executed because a tool has already been used" and the like
    _, _, body = text.partition("\n")
    return body.lstrip().startswith(_FAILED)


def _requests(path: Path, document: list[dict[str, Any]], tally: Tally) -> list[dict[str, Any]]:
    """The ``api_req_started`` entries of the ``ui_messages.json`` beside the history,
    each with its ``ts`` and the ``ts`` of the first entry after it (when its answer
    began), when there is one per answer; else none (said in the report)."""
    shown = _beside(path)
    if not isinstance(shown, list):
        return []
    entries = [e for e in shown if isinstance(e, dict)]
    requests: list[dict[str, Any]] = []
    for position, entry in enumerate(entries):
        if entry.get("say") != "api_req_started":
            continue
        try:
            counts = json.loads(entry.get("text") or "{}")
        except ValueError:
            counts = {}
        after = next((e.get("ts") for e in entries[position + 1:] if e.get("say") != "api_req_started"), None)
        requests.append({"sent": entry.get("ts"), "answered": after, "counts": counts if isinstance(counts, dict) else {}})
    answers = sum(m["role"] == "assistant" for m in document)
    if len(requests) != answers:
        tally.assume(f"times and counts not taken from {path.name}: {len(requests)} requests there for {answers} answers here")
        return []
    return requests


def _time(requests: list[dict[str, Any]], answers: int, role: str) -> float | None:
    """A message's time from its request: a user message was sent with the next
    request, an answer began arriving after its own."""
    if answers >= len(requests):
        return None
    return epoch_seconds(requests[answers]["answered" if role == "assistant" else "sent"])


def _measured(request: dict[str, Any] | None, metrics: object, start: int, end: int) -> Usage | None:
    """The input the request that wrote ``messages[end]`` (carrying ``messages[start:end]``:
    after a condensing, from its summary on) was counted: from
    ``ui_messages.json`` when paired (uncached, cache writes and reads apart), else the
    answer's ``metrics`` (uncached and cached together)."""
    counts = request["counts"] if request else {}
    fresh, written, read = (count_at(counts, (key,)) for key in ("tokensIn", "cacheWrites", "cacheReads"))
    if fresh + written + read:
        return Usage(start, end, fresh + written + read, read, written)
    prompt, cached = (count_at(metrics, ("tokens", key)) for key in ("prompt", "cached"))
    return Usage(start, end, prompt + cached, cached) if prompt + cached else None


def _metadata_model(path: Path) -> str | None:
    """The model ``task_metadata.json`` says the task last used (``model_usage``)."""
    used = _object(_beside(path)).get("model_usage")
    last = used[-1] if isinstance(used, list) and used and isinstance(used[-1], dict) else {}
    return named_model(last.get("model_id"))


def _beside(path: Path) -> object:
    """A JSON file the extension keeps beside the history, or None when there is none
    or it does not parse (those files only add times, counts and a model name)."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _title(document: list[dict[str, Any]]) -> str:
    """The task as its first message gives it, without the ``<task>`` tags."""
    return title_from(_TASK_TAGS.sub(" ", _first_text(document[0])).strip())
