"""Claude Code's attachment lines: what the model was shown of each.

Claude Code writes hook output, memory files, skill and MCP listings, reminders and
queued prompts as ``attachment`` lines, and turns each into a user message (mostly a
``<system-reminder>``) when it sends the conversation. ``shown`` gives that text, read
off Claude Code 2.1's own conversion; types it sends nothing for give None.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

#: Types Claude Code sends the model nothing for (their lines are for its interface).
SILENT = frozenset({
    "already_read_file", "auto_mode_exit_notice", "command_permissions", "context_efficiency", "context_tip",
    "dynamic_skill", "edited_image_file", "goal_status", "hook_cancelled", "hook_deferred_tool",
    "hook_error_during_execution", "hook_non_blocking_error", "hook_permission_decision", "hook_system_message",
    "max_turns_reached", "structured_output", "teammate_shutdown_batch", "batching_reminder_sent",
})


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    if isinstance(value, dict):
        for key in ("content", "text", "prompt", "snippet"):
            if key in value:
                return _text(value[key])
    return "" if value is None else json.dumps(value, ensure_ascii=False)


def _hook(label: str, a: dict[str, Any]) -> str | None:
    text = _text(a.get("content"))
    return f"{a.get('hookName', 'hook')} hook {label}: {text}" if text else None


def _hook_success(a: dict[str, Any]) -> str | None:
    # Only these events' output reaches the model (the others show in the interface).
    if a.get("hookEvent") not in ("SessionStart", "UserPromptSubmit", "UserPromptExpansion"):
        return None
    return _hook("success", a)


def _file(a: dict[str, Any]) -> str | None:
    content = a.get("content")
    body = content["file"] if isinstance(content, dict) and isinstance(content.get("file"), dict) else content
    return f"Contents of {a.get('filename', '')}:\n{_text(body)}"


def _listing(intro: str, key: str, a: dict[str, Any]) -> str | None:
    items = a.get(key)
    text = "\n".join(str(i) for i in items) if isinstance(items, list) else _text(items)
    return f"{intro}\n{text}" if text else None


_RENDER: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "hook_success": _hook_success,
    "hook_additional_context": functools.partial(_hook, "additional context"),
    "hook_stopped_continuation": lambda a: f"{a.get('hookName', 'hook')} hook stopped continuation: {_text(a.get('message'))}",
    "hook_blocking_error": lambda a: (f"{a.get('hookName', 'hook')} hook blocking error from command: "
                                      f"\"{a['blockingError'].get('command', '')}\": {a['blockingError'].get('blockingError', '')}"),
    "nested_memory": lambda a: f"Contents of {a.get('path', '')}:\n{_text(a.get('content'))}",
    "skill_listing": lambda a: f"The following skills are available for use with the Skill tool:\n{_text(a['content'])}" if a.get("content") else None,
    "mcp_instructions_delta": functools.partial(_listing, "# MCP Server Instructions\nThe following MCP servers have provided instructions for how to use their tools and resources:", "addedBlocks"),
    "deferred_tools_delta": functools.partial(_listing, "The following deferred tools are now available (their schemas load on request):", "addedNames"),
    "agent_listing_delta": functools.partial(_listing, "The following agent types are now available:", "addedTypes"),
    "edited_text_file": lambda a: f"Note: {a.get('filename', '')} was modified, either by the user or by a linter. Here are the relevant changes:\n{_text(a.get('snippet'))}",
    "file": _file,
    "date_change": lambda a: f"The date has changed. Today's date is now {a.get('newDate', '')}.",
    "invoked_skills": lambda a: "\n".join(f"### Skill: {s.get('name', '')}\nPath: {s.get('path', '')}\n{_text(s.get('content'))}"
                                         for s in a.get("skills") or [] if isinstance(s, dict)) or None,
    "task_reminder": lambda a: "\n".join(f"#{t.get('id')}. [{t.get('status')}] {t.get('subject')}" for t in a.get("content") or [] if isinstance(t, dict)) or None,
    "todo_reminder": lambda a: "\n".join(f"[{t.get('status')}] {t.get('content')}" for t in a.get("content") or [] if isinstance(t, dict)) or None,
    "budget_usd": lambda a: f"USD budget: ${a.get('used')}/${a.get('total')}; ${a.get('remaining')} remaining",
    "token_usage": lambda a: f"Token usage: {a.get('used')}/{a.get('total')}; {a.get('remaining')} remaining",
}


def shown(attachment: object) -> tuple[str, bool] | None:
    """(text, the user's own words) the model was shown for an attachment; None when
    Claude Code sends nothing for it. A queued prompt is the user's own message; the
    rest are reminders, wrapped as Claude Code wraps them."""
    if not isinstance(attachment, dict):
        return None
    kind = attachment.get("type")
    if not isinstance(kind, str) or kind in SILENT:
        return None
    if kind == "queued_command":
        prompt = _text(attachment.get("prompt"))
        return (prompt, True) if prompt else None
    render = _RENDER.get(kind)
    text: str | None
    try:
        text = render(attachment) if render is not None else _text({k: v for k, v in attachment.items() if k in ("content", "text", "prompt")} or None)
    except (KeyError, TypeError, AttributeError):
        text = None
    if not text:
        return None
    return f"<system-reminder>\n{text}\n</system-reminder>", False
