"""A child process for fault injection: saves growing histories in a loop until killed.

Usage: python saver.py WORKSPACE
Prints "ready" once it is about to start saving, then the revision of every save as
soon as that save has returned (so the parent knows which saves completed).
"""

import sys

from histories import history

from glyphpack import Workspace

CYCLE = 40


def main() -> None:
    workspace = Workspace(sys.argv[1])
    revision = workspace.load("conv", "agent").revision
    print("ready", flush=True)
    k = 0
    while True:
        # Cycling back to a shorter history replaces the stored one on purpose.
        revision = workspace.save("conv", "agent", history(k % CYCLE + 1, 1), revision=revision, replace=True).revision
        print(revision, flush=True)
        k += 1


if __name__ == "__main__":
    main()
