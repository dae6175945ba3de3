"""The ``glyphpack`` command line: a thin shell that parses, calls the library, formats.

The parser is built from a table (``COMMANDS``): each command group's module lists its
commands (name, help, arguments, handler), and the handlers are thin over the library.
Each command imports what it uses when it runs, so the history commands (``tree``,
``branch``, ``fork``, ``export``, ``context``) never load numba.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import GlyphpackError
from . import history, importing, ladder, pages, serving
from .common import Command

#: Every command, in the order ``glyphpack --help`` lists them.
_ORDER = ("render", "read", "profiles", "legibility", "tree", "fork", "branch", "delete", "rename", "export", "compact", "shake", "context",
          "import", "workspace", "refs", "recall", "session", "eval", "proxy", "serve", "proxy-key", "generate-session", "warm", "fonts")
_BY_NAME = {c.name: c for group in (pages, history, ladder, importing, serving) for c in group.COMMANDS}
COMMANDS: tuple[Command, ...] = tuple(_BY_NAME[name] for name in _ORDER)


def build_parser() -> argparse.ArgumentParser:
    """The parser, one subcommand per row of ``COMMANDS``."""
    from .. import __version__

    parser = argparse.ArgumentParser(prog="glyphpack", description="Text packed into pages of bitmap glyphs for vision models.")
    parser.add_argument("--version", action="version", version=f"glyphpack {__version__}")
    parser.add_argument("--debug", action="store_true", help="show a traceback instead of a one-line error")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help)
        command.arguments(p)
        if command.run is not None:
            p.set_defaults(run=command.run)
    return parser


def _one_line_warning(message: Warning | str, category: type[Warning], *rest: Any, **kwargs: Any) -> str:
    return f"glyphpack: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Exit codes: 0 done, 1 the work did not succeed (a view that does
    not fit, an internal error), 2 bad input or paths. Errors are one line on stderr;
    ``--debug`` shows the traceback instead."""
    args = build_parser().parse_args(argv)
    # Warnings (an unknown model id, say) read as one line, like the errors.
    warnings.formatwarning = _one_line_warning
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("\nglyphpack: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        code, text = _error_line(exc)
        print(f"glyphpack: error: {text}", file=sys.stderr)
        return code


def _error_line(exc: Exception) -> tuple[int, str]:
    """(exit code, one line) for an error that ends a command."""
    if isinstance(exc, GlyphpackError):
        return 2, " ".join(str(exc).split())
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return 2, f"{where}{exc.strerror or exc}"
    if isinstance(exc, MemoryError):
        return 1, "out of memory; try a smaller input"
    return 1, f"internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); run with --debug for the traceback"
