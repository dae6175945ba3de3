"""The build step that makes a fresh install's first render fast (glyphpack/_render/prebuilt.py).

Everything else is in pyproject.toml. After the package is built, ``glyphpack warm``
runs against it, in a fresh process with empty caches, and numba's cache of the render
kernels it compiled (for this machine) goes into the package's ``_render/_prebuilt``
(the font atlases it built stay out: 90 MB with Unifont merged, 0.5 s to build). Best effort: if it cannot run, the package is built
without them and compiles on first use, as a checkout does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithCaches(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install runs from the checkout: nothing is copied
        prebuilt = Path(self.build_lib) / "glyphpack" / "_render" / "_prebuilt"
        with tempfile.TemporaryDirectory() as scratch:
            cache = Path(scratch)
            # The build environment's own path (pip's isolated one lives there) stays behind the package.
            path = os.pathsep.join(p for p in (self.build_lib, os.environ.get("PYTHONPATH", "")) if p)
            env = {**os.environ, "PYTHONPATH": path, "GLYPHPACK_CACHE_DIR": str(cache), "NUMBA_CACHE_DIR": str(cache / "numba")}
            try:
                done = subprocess.run([sys.executable, "-m", "glyphpack", "warm"], env=env, capture_output=True, text=True, timeout=600)
            except (OSError, subprocess.SubprocessError) as exc:
                print(f"glyphpack: kernels not prebuilt ({exc}); they compile on first use")
                return
            kernels = [p for p in (cache / "numba").rglob("kernels.*") if p.is_file()]
            if done.returncode != 0 or not kernels:
                print(f"glyphpack: kernels not prebuilt (warm exited {done.returncode}: {done.stderr.strip()[-300:]}); they compile on first use")
                return
            (prebuilt / "numba").mkdir(parents=True, exist_ok=True)
            for path in kernels:
                shutil.copyfile(path, prebuilt / "numba" / path.name)
            print(f"glyphpack: {len(kernels)} kernel cache files prebuilt")


setup(cmdclass={"build_py": BuildWithCaches})
