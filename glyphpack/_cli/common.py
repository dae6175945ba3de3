"""What the commands share: argument types, output paths checked before any work, tables, progress."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import GlyphpackError, StoreError
from .._types import APIS

if TYPE_CHECKING:
    from .._history.tree import SessionTree


#: Shape names, for argument choices without loading any font (a test checks them
#: against ``SHAPES``).
WORKSPACE_HELP = "the workspace: a folder, or a PostgreSQL URL (postgresql://user:password@host/db) for a fleet"


SHAPE_NAMES = ("5x8", "6x13", "8x13", "8x13-loose", "7x14", "9x15", "9x15-loose", "9x18", "10x20", "8x13-tall", "unifont")


#: Session formats, for argument choices (a test checks them against the registry).
FORMAT_NAMES = (
    "claude-code", "pi", "codex", "openhands", "swe-agent", "mini-swe-agent", "openhands-events", "copilot-cli", "kimi-cli", "gemini-cli", "opencode",
    "cline", "goose", "crush", "aider",
    *APIS, "glyphpack",
)


def _page_size(value: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in value.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"page size must look like 1568x784, not {value!r}") from None
    return width, height


def _output_file(name: str | None) -> Path | None:
    """An output file's path, checked before any work: its folder exists, and it is
    not a folder itself."""
    if name is None:
        return None
    path = Path(name)
    if path.is_dir():
        raise GlyphpackError(f"cannot write {path}: it is a folder; name a file")
    if not path.parent.is_dir():
        raise GlyphpackError(f"cannot write {path}: the folder {path.parent} does not exist")
    return path


def _output_dir(name: str | None) -> Path | None:
    """An output folder's path, checked before any work: a folder, or a new one in a
    folder that exists (created when there is something to write)."""
    if name is None:
        return None
    path = Path(name)
    if path.exists() and not path.is_dir():
        raise GlyphpackError(f"cannot write into {path}: it exists and is not a folder")
    if not path.parent.is_dir():
        raise GlyphpackError(f"cannot create {path}: the folder {path.parent} does not exist")
    return path


def _write(path: Path, data: bytes) -> None:
    """Atomically (a temporary file renamed into place): a failure never leaves a
    truncated output."""
    from .._files import atomic_write

    path.parent.mkdir(exist_ok=True)
    atomic_write(path, data, durable=False)


def _read_input(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise GlyphpackError(f"cannot read {name}: {exc.strerror}") from None


def table(rows: list[tuple[str, str]]) -> str:
    """Two aligned columns."""
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _progress_bar(description: str) -> tuple[Any, Callable[[int, int], None]]:
    """A tqdm bar on stderr that appears only if the work takes more than half a second."""
    from tqdm import tqdm

    bar = tqdm(total=0, unit="page", desc=description, delay=0.5, file=sys.stderr, leave=False, disable=None)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    return bar, update


@dataclasses.dataclass(frozen=True)
class Command:
    """One subcommand of the table the parser is built from: its name and help line,
    what it adds to its parser, and what runs it (None for a group whose ``arguments``
    adds subcommands of its own, each with its ``run``)."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int] | None = None


def conversation_arguments(parser: argparse.ArgumentParser, conversation_nargs: str | None = None) -> None:
    """A command over a workspace and one of its conversations."""
    parser.add_argument("workspace", help=WORKSPACE_HELP)
    parser.add_argument("conversation", nargs=conversation_nargs)


def _tree(path: str, *, write: bool) -> SessionTree:
    """A workspace's session tree: read-only (nothing is written, not even a schema),
    or checked for damage before anything is written to it."""
    from .._history.store import is_database_location
    from .._history.tree import SessionTree

    if is_database_location(path):  # PostgreSQL checks its own pages; the schema is checked on opening
        from .._history.postgres import PostgresDatabase

        return SessionTree(PostgresDatabase(path, read_only=not write, pool_size=1))
    database = Path(path, "tree.sqlite3")
    if not database.is_file():
        raise StoreError(f"{path} is not a glyphpack workspace (no tree.sqlite3 in it)")
    tree = SessionTree(database, read_only=not write)
    if write:
        try:
            tree.verify()
        except StoreError:
            tree.close()
            raise
    return tree


def _shown(location: str) -> str:
    """A workspace location as it may be printed: a database URL without its password."""
    from .._secrets import redacted

    return redacted(location)


def _stored_agent(workspace: Any, path: str, conversation: str, agent: str | None) -> str:
    """``agent``, when it has a transcript in ``conversation``; else ``StoreError``
    listing what is stored."""
    if agent is None or (conversation, agent) not in workspace.transcripts():
        stored = ", ".join(f"{c} {a}" for c, a in workspace.transcripts()) or "none"
        raise StoreError(f"no transcript for {conversation} {agent or '(no agent)'} in {path} (stored: {stored})")
    return agent
