"""A child process for the concurrency test: appends to one conversation and saves
one transcript, counting the saves rejected as conflicts.

Usage: python worker.py WORKSPACE NAME COUNT
Prints "successes conflicts".
"""

import sys

from glyphpack import ConflictError, Message, Text, Workspace


def main() -> None:
    path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    workspace = Workspace(path)
    successes = conflicts = 0
    for i in range(count):
        workspace.tree.append("shared", Message("user", (Text(f"{name} {i}"),), id=f"{name}-{i}"))
        current = workspace.load("shared", "agent")
        extra = (Message("user", (Text(f"{name} asks {i}"),)), Message("assistant", (Text(f"{name} answer {i}"),)))
        try:
            workspace.save("shared", "agent", current.messages + extra, revision=current.revision)
            successes += 1
        except ConflictError:
            conflicts += 1
    print(successes, conflicts)


if __name__ == "__main__":
    main()
