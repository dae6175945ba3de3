"""A child process for the concurrency test: appends to one tree conversation (raw
appends) and saves one transcript of another, reporting each save as it returns.

Usage: python worker.py WORKSPACE NAME COUNT
Prints one line per save: "saved I" or "conflict I".
"""

import sys

from glyphpack import ConflictError, Message, Text, Workspace


def main() -> None:
    path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    workspace = Workspace(path)
    for i in range(count):
        workspace.tree.append("chain", Message("user", (Text(f"{name} {i}"),), id=f"{name}-{i}"))
        current = workspace.load("shared", "agent")
        extra = (
            Message("user", (Text(f"{name} asks {i}"),), id=f"{name}-asks-{i}"),
            Message("assistant", (Text(f"{name} answer {i}"),), id=f"{name}-answer-{i}"),
        )
        try:
            workspace.save("shared", "agent", current.messages + extra, revision=current.revision)
            print("saved", i, flush=True)
        except ConflictError:
            print("conflict", i, flush=True)


if __name__ == "__main__":
    main()
