"""The commands that serve: proxy, proxy-key, serve."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
from pathlib import Path

from .._errors import UsageError
from .common import WORKSPACE_HELP, Command, _shown


def cmd_proxy_key(args: argparse.Namespace) -> int:
    """A new client key for a person: its digest appended to the keys file, the key
    printed once (on stdout, for the person's harness: ``x-glyphpack-client-key``)."""
    from .._proxy.identity import CLIENT_KEY_HEADER, ClientKeys

    key = ClientKeys.issue(Path(args.keys), args.person)
    print(key)
    print(f"issued to {args.person}; {args.keys} keeps its digest only. The person's harness sends it as the header "
          f"{CLIENT_KEY_HEADER} (Claude Code: ANTHROPIC_CUSTOM_HEADERS='{CLIENT_KEY_HEADER}: <key>')", file=sys.stderr)
    return 0


def cmd_proxy(args: argparse.Namespace) -> int:
    try:
        from .._proxy.conversations import ProxySettings, Recorder
        from .._proxy.identity import ClientKeys
        from .._proxy.log import ProxyLog
        from .._proxy.server import STATUS_PATH, Proxy, listen, serve, upstream_url
    except ImportError as exc:
        raise UsageError(f"glyphpack proxy needs its extra ({exc.name} is missing): pip install '.[proxy]' (the proxy extra)") from None
    from .._history.store import Workspace
    from .._session.compactor import Thresholds

    upstream = upstream_url(args.upstream)
    if args.context_window is not None:  # the limits checked before anything listens
        Thresholds.for_window(args.context_window, args.threshold, args.target)
    for name in args.identity_header:
        if not re.fullmatch(r"[A-Za-z0-9-]{1,64}", name):
            raise UsageError(f"--identity-header must be a header name (letters, digits and '-'), not {name[:64]!r}")
    if args.require_client_key and not args.client_keys:
        raise UsageError("--require-client-key needs --client-keys FILE (the keys glyphpack proxy-key issued)")
    keys = ClientKeys(Path(args.client_keys), required=args.require_client_key) if args.client_keys else None
    settings = ProxySettings(context_window=args.context_window, threshold=args.threshold, target=args.target,
                             identity_headers=tuple(name.lower() for name in args.identity_header), client_keys=keys)
    summarizer = None if args.summarizer == "none" else args.summarizer
    json_log = Path(args.log_json) if args.log_json else None
    if json_log is not None:  # checked before anything listens
        try:
            json_log.open("a", encoding="utf-8").close()
        except OSError as exc:
            raise UsageError(f"--log-json {json_log}: cannot write it ({exc.strerror})") from None
    if not 1 <= args.workers <= MAX_WORKERS:
        raise UsageError(f"--workers must be 1 to {MAX_WORKERS} processes, not {args.workers}")
    sock = listen(args.host, args.port)  # once, before the workers: they share it, the kernel spreads connections
    url = f"http://{args.host}:{sock.getsockname()[1]}"
    children = _fork_workers(args.workers - 1)  # None: this is a worker, which serves and exits
    failed = True
    try:
        with Workspace(args.workspace) as workspace:
            recorder = Recorder(workspace, settings)
            known = recorder.index_workspace()
            log = ProxyLog(None if args.quiet else sys.stderr, json_log)
            if children is not None:  # the first process announces, for all of them
                workers = f"; {args.workers} worker processes" if args.workers > 1 else ""
                print(f"glyphpack proxy on {url} -> {_shown(upstream)}; workspace {workspace.location} ({known} conversations known){workers}", file=sys.stderr)
                print(f"  Claude Code: ANTHROPIC_BASE_URL={url} claude    OpenAI SDKs: OPENAI_BASE_URL={url}/v1    totals: {url}{STATUS_PATH}", file=sys.stderr, flush=True)
            serve(Proxy(recorder, upstream, summarizer=summarizer, log=log).app, args.host, args.port, sock=sock)
            # It returns once SIGINT or SIGTERM stopped it; each worker's totals are its own.
            print(log.summary() + (f" (worker {os.getpid()})" if args.workers > 1 else ""), file=sys.stderr, flush=True)
        failed = False
    except Exception as exc:
        if children is not None:
            raise
        print(f"glyphpack proxy: worker {os.getpid()} stopped: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    finally:
        if children is None:
            os._exit(1 if failed else 0)  # a worker leaves without the parent's atexit work
        _stop_workers(children)
        sock.close()
    return 0


#: The most worker processes ``glyphpack proxy --workers`` starts.
MAX_WORKERS = 64


def _fork_workers(count: int) -> list[int] | None:
    """Fork ``count`` worker processes (before any thread or workspace exists, so each
    opens its own); their pids in the parent, None in a worker."""
    children: list[int] = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            return None
        children.append(pid)
    return children


def _stop_workers(children: list[int]) -> None:
    """Stop the worker processes (each finishes the requests it is serving) and wait."""
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in children:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def cmd_serve(args: argparse.Namespace) -> int:
    """The workspace in a browser: an index of projects and conversations, each
    conversation's page, search across all of them and recall from the page."""
    try:
        from .._proxy.server import serve
        from .._session.serve import serve_app
    except ImportError as exc:
        raise UsageError(f"glyphpack serve needs the proxy extra ({exc.name} is missing): pip install '.[proxy]'") from None
    from .._history.store import Workspace

    with Workspace(args.workspace, read_only=True) as workspace:  # it only reads: the proxy may be writing
        count = len(workspace.tree.conversations())

        def announce(url: str) -> None:
            print(f"glyphpack serve on {url}: workspace {workspace.location} ({count} conversations); Ctrl-C stops it", file=sys.stderr, flush=True)

        serve(serve_app(workspace), args.host, args.port, announce=announce)
    return 0


def _proxy_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--upstream", required=True, metavar="anthropic|openai|gemini|URL", help="where requests go (the only place they go)")
    p.add_argument("--workspace", required=True, metavar="WS", help=WORKSPACE_HELP + ", where conversations are recorded")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8787, help="the port (default 8787; 0: any free one, printed)")
    p.add_argument("--context-window", type=int, metavar="TOKENS", help="the models' window (default: each provider family's)")
    p.add_argument("--threshold", type=int, metavar="TOKENS", help="compact at this many (default: where it bills least, at most the window less a reply reserve)")
    p.add_argument("--target", type=int, metavar="TOKENS", help="compact to this many (default: where it bills least)")
    p.add_argument("--summarizer", default="same", metavar="MODEL|same|none",
                   help="the model that summarizes, through the upstream with the caller's key (default: the request's own)")
    p.add_argument("--log-json", metavar="FILE", help="also append one JSON object per request to FILE (counts, statuses, times; never content or keys)")
    p.add_argument("--quiet", action="store_true", help="no line per request on stderr (the totals still print at exit)")
    p.add_argument("--identity-header", action="append", default=[], metavar="NAME",
                   help="a header that tells clients apart besides their keys (repeatable): a gateway's per-user header")
    p.add_argument("--client-keys", metavar="FILE",
                   help="the client keys issued with glyphpack proxy-key: a request with one (x-glyphpack-client-key) is its person's, whatever key goes upstream")
    p.add_argument("--require-client-key", action="store_true", help="refuse (401) a request without one of those keys")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="serve from N processes sharing the port and the workspace (default 1): many clients on many cores")


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free one)")


def _proxy_key_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("person", help="who the key is for (a name: letters, digits, '.', '_', '-'); several keys may name one person")
    p.add_argument("--keys", required=True, metavar="FILE", help="the file of issued keys' digests the proxy reads (--client-keys); made if missing")


COMMANDS = (
    Command("proxy", "an Anthropic-, OpenAI- and Gemini-compatible endpoint that records and compacts any harness's requests", _proxy_arguments, cmd_proxy),
    Command("serve", "browse a workspace: an index of projects and conversations, search across them, recall from the page", _serve_arguments, cmd_serve),
    Command("proxy-key", "issue a client key for a person (their conversations stay theirs when their upstream token rotates)", _proxy_key_arguments,
            cmd_proxy_key),
)
