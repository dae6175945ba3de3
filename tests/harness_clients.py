"""Where the real agent clients the proxy tests drive are installed (``.ci/run`` puts
them under ``.ci/node``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

NODE_BIN = Path(__file__).resolve().parent.parent / ".ci" / "node" / "node_modules" / ".bin"


def installed(command: str, variable: str, package: str) -> str:
    """The executable of ``command``: ``$variable``, ``command`` on the PATH, or the one
    ``.ci/run`` installs; skips the test without one (fails where the matching
    ``GLYPHPACK_REQUIRE_...`` variable is set, as in CI)."""
    local = NODE_BIN / command
    found = os.environ.get(variable) or shutil.which(command) or (str(local) if local.exists() else None)
    if found is None:
        required = variable.replace("GLYPHPACK_", "GLYPHPACK_REQUIRE_", 1)
        if os.environ.get(required):
            pytest.fail(f"{command} is required here ({required}) but was not found")
        pytest.skip(f"{command} is not installed (npm install {package}, or set {variable})")
    return found
