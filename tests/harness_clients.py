"""Where the real programs the tests drive are installed: the agent clients (``.ci/run``
puts them under ``.ci/node``) and the peers compared with (claude-code-log, in a
virtual environment of its own under ``.ci/claude-code-log``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CI_DIR = Path(__file__).resolve().parent.parent / ".ci"
NODE_BIN = CI_DIR / "node" / "node_modules" / ".bin"


def installed(command: str, variable: str, package: str, *, local: Path | None = None, how: str = "npm install") -> str:
    """The executable of ``command``: ``$variable``, ``command`` on the PATH, or the one
    ``.ci/run`` installs (``local``, default under ``.ci/node``); skips the test without
    one (fails where the matching ``GLYPHPACK_REQUIRE_...`` variable is set, as in CI)."""
    local = local or NODE_BIN / command
    found = os.environ.get(variable) or shutil.which(command) or (str(local) if local.exists() else None)
    if found is None:
        required = variable.replace("GLYPHPACK_", "GLYPHPACK_REQUIRE_", 1)
        if os.environ.get(required):
            pytest.fail(f"{command} is required here ({required}) but was not found")
        pytest.skip(f"{command} is not installed ({how} {package}, or set {variable})")
    return found
