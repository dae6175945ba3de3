"""A host of a fleet, for the PostgreSQL tests: a separate process on the same database.

Usage:
    python host.py race URL NAME GO_FILE   load c/a, print "loaded REVISION", wait for
        GO_FILE, append a turn and save; print "saved NAME" or "conflict NAME".
    python host.py request URL             open task/coder and print, as JSON, the
        compaction it found in force, whether building the next request compacted
        again, and that request (Anthropic's body), without sending it.
    python host.py stall URL               save a turn to c/a, but stop inside the save's
        transaction (after the transcript's rows, before the tree's), print "inside" and
        wait there to be killed.
"""

import json
import sys
import time
from pathlib import Path

from test_session_sdk import DENSE_SESSION

import glyphpack
from glyphpack import ConflictError, Message, Workspace


def race(url: str, name: str, go: Path) -> None:
    with Workspace(url) as workspace:
        loaded = workspace.load("c", "a")
        print("loaded", loaded.revision, flush=True)
        while not go.exists():
            time.sleep(0.005)
        mine = (Message("user", f"{name} asks", id=f"{name}-q"), Message("assistant", f"{name} answers", id=f"{name}-a"))
        try:
            workspace.save("c", "a", loaded.messages + mine, revision=loaded.revision)
            print("saved", name, flush=True)
        except ConflictError:
            print("conflict", name, flush=True)


def request(url: str) -> None:
    with glyphpack.open_session(url, "task", "coder", model="claude-sonnet-4-5", context_window=30_000, policy=DENSE_SESSION) as s:
        in_force = s.view.covers if s.view else None
        body = s.request("anthropic")
        compacted = s.last_request is not None and s.last_request.compaction is not None
        print(json.dumps({"covers": in_force, "compacted_again": compacted, "request": body}))


def stall(url: str) -> None:
    from glyphpack._history.tree import SessionTree

    def stalled(*args: object, **options: object) -> None:
        print("inside", flush=True)
        time.sleep(600)

    SessionTree.record = stalled  # type: ignore[method-assign]
    with Workspace(url) as workspace:
        loaded = workspace.load("c", "a")
        more = (Message("user", "stalled asks", id="stall-q"), Message("assistant", "never saved", id="stall-a"))
        workspace.save("c", "a", loaded.messages + more, revision=loaded.revision)


if __name__ == "__main__":
    {"race": lambda: race(sys.argv[2], sys.argv[3], Path(sys.argv[4])), "request": lambda: request(sys.argv[2]),
     "stall": lambda: stall(sys.argv[2])}[sys.argv[1]]()
