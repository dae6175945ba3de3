"""The commands over a workspace's tree and transcripts: tree, fork, branch, delete, rename, export, refs,
recall, workspace copy."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .._errors import StoreError, UsageError
from .common import WORKSPACE_HELP, Command, _output_file, _shown, _stored_agent, _tree, _write, conversation_arguments


def cmd_tree(args: argparse.Namespace) -> int:
    from .._history.export import draw_tree

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
    from .._history.store import Workspace
    from .._history.view import compaction_notes

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
    from .._history.store import Workspace

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
    from .._history.store import Workspace

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
    from .._history.store import Workspace

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
    from .._history.store import Workspace

    _tree(args.workspace, write=True).close()
    with Workspace(args.workspace) as workspace:
        workspace.tree.set_title(args.conversation, args.title)
    print(f"{args.conversation}: titled {args.title!r}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .._history.export import export_json, export_markdown

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
    from .._history.store import Workspace
    from .._session.navigator import export_html

    if out is None:
        raise UsageError("--format html needs --out FILE.html")
    _tree(args.workspace, write=False).close()  # a workspace, and sound, before anything is read
    with Workspace(args.workspace, read_only=True) as workspace:
        page = export_html(workspace, args.conversation)
    data = page.encode("utf-8")
    _write(out, data)
    print(f"wrote {out} ({len(data):,} bytes); open it in a browser, no network needed")
    return 0


def cmd_workspace_copy(args: argparse.Namespace) -> int:
    from .._history.copy import copy_workspace
    from .._history.store import Workspace

    with Workspace(args.source, read_only=True) as source, Workspace(args.destination) as destination:
        report = copy_workspace(source, destination, progress=lambda line: print(f"  {line}", file=sys.stderr))
        print(
            f"copied {source.location} -> {destination.location}: {report.conversations:,} conversations, "
            f"{report.messages:,} messages, {report.transcripts:,} transcripts, {report.views:,} compaction views; "
            f"both hold the same (compared)"
        )
    return 0


def _stored(args: argparse.Namespace) -> tuple[str, tuple[Any, ...], Any]:
    """The agent a ``refs``/``recall`` command reads (``--agent``, else the main one), its
    stored messages, and the compaction in force for them (None: none)."""
    from .._history.store import Workspace
    from .._history.view import view_for

    with Workspace(args.workspace, read_only=True) as workspace:
        tips = workspace.tree.agent_tips(args.conversation)
        agent = _stored_agent(workspace, args.workspace, args.conversation, args.agent or next(iter(tips), None))
        messages = workspace.load(args.conversation, agent).messages
        return agent, messages, view_for(workspace, args.conversation, agent, messages)


def cmd_refs(args: argparse.Namespace) -> int:
    """Every ref the conversation's next request carries (each stub's and note's), with
    where it is and what it says, and the range the compaction in force stands for."""
    from .._history.recall import hinted_refs, range_ref
    from .._history.view import request_messages

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
    from .._compaction.snapshot import serialize_messages
    from .._history.recall import recall

    _, messages, _ = _stored(args)
    answer = recall(messages, args.ref, args.page, range_text=serialize_messages)
    if answer.is_error:
        raise UsageError(answer.as_text().removeprefix("glyphpack recall: "))
    print(answer.as_text())
    return 0


def _tree_arguments(p: argparse.ArgumentParser) -> None:
    conversation_arguments(p, "?")
    p.add_argument("--all", action="store_true", help="every message (default: long runs with nothing to mark counted on one line)")


def _fork_arguments(p: argparse.ArgumentParser) -> None:
    conversation_arguments(p)
    p.add_argument("--at", metavar="MESSAGE", help="fork at this message (id or unique prefix; default: the tip)")
    p.add_argument("--new", metavar="ID", help="the new conversation's id (default: generated)")
    p.add_argument("--agent", help="whose history (default: the conversation's main agent)")


def _branch_arguments(p: argparse.ArgumentParser) -> None:
    conversation_arguments(p)
    p.add_argument("message", help="message id or a unique prefix of it")
    p.add_argument("--agent", help="whose tip and transcript (default: the conversation's main agent)")


def _delete_arguments(p: argparse.ArgumentParser) -> None:
    conversation_arguments(p)
    p.add_argument("--yes", action="store_true", help="delete it (without: print what would be deleted, delete nothing)")


def _rename_arguments(p: argparse.ArgumentParser) -> None:
    conversation_arguments(p)
    p.add_argument("title")


def _export_arguments(p: argparse.ArgumentParser) -> None:
    conversation_arguments(p, "?")
    p.add_argument("--format", choices=("json", "md", "html"), default="md")
    p.add_argument("--whole-tree", action="store_true", help="every branch, not just the path to the tip")
    p.add_argument("--out", metavar="FILE")


def _workspace_arguments(p: argparse.ArgumentParser) -> None:
    commands = p.add_subparsers(dest="workspace_command", required=True, metavar="COMMAND")
    copy = commands.add_parser("copy", help="copy every conversation, transcript and view into an empty workspace, then compare both")
    copy.add_argument("source", help=WORKSPACE_HELP)
    copy.add_argument("destination", help=WORKSPACE_HELP + " (new or empty)")
    copy.set_defaults(run=cmd_workspace_copy)


def _refs_arguments(p: argparse.ArgumentParser) -> None:
    conversation_arguments(p)
    p.add_argument("--agent", help="the agent (default: the conversation's main agent)")


def _recall_arguments(p: argparse.ArgumentParser) -> None:
    conversation_arguments(p)
    p.add_argument("ref", help="as a stub or note names it (glyphpack refs lists them)")
    p.add_argument("--page", type=int, default=1, help="the page of a long text (default 1)")
    p.add_argument("--agent", help="the agent (default: the conversation's main agent)")


COMMANDS = (
    Command("tree", "draw a workspace's conversations with their branches and tips", _tree_arguments, cmd_tree),
    Command("fork", "copy a conversation's path into a new conversation", _fork_arguments, cmd_fork),
    Command("branch", "move a conversation's tip to one of its messages", _branch_arguments, cmd_branch),
    Command("delete", "delete a conversation: its tree, transcripts and compactions (says what first; --yes does it)", _delete_arguments, cmd_delete),
    Command("rename", "give a conversation a title (its id stays)", _rename_arguments, cmd_rename),
    Command("export", "a conversation as JSON or Markdown, or the workspace as a browsable HTML file", _export_arguments, cmd_export),
    Command("workspace", "move a workspace between a folder and PostgreSQL", _workspace_arguments),
    Command("refs", "every ref a conversation's next request carries, and what the compaction in force stands for", _refs_arguments, cmd_refs),
    Command("recall", "what a ref stands for, exactly, from the stored transcript", _recall_arguments, cmd_recall),
)
