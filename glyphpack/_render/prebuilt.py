"""Caches built with the package, so a fresh install's first render loads instead of
compiling (the kernels took 2-3 s to compile).

``pip install .`` builds a wheel on the machine it installs on; its build step
(``setup.py``, ``build_py``) runs ``glyphpack warm`` against the built package and puts
numba's cache files for ``kernels.py`` in ``numba/``; they are copied into the user cache
at the first import, as numba finds them only there. The font atlases are not prebuilt
(with Unifont merged they take 90 MB, and build in 0.5 s). A checkout, an editable install or a
failed build step has none, and everything is built on first use as before. numba checks
a copied file itself: its source hash against ``kernels.py`` as installed and its CPU
against this machine's, and compiles anew when either differs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

PREBUILT = Path(__file__).resolve().parent / "_prebuilt"
KERNELS = PREBUILT / "numba"


def seed_kernel_cache(target: Path) -> int:
    """Copy the prebuilt kernel cache files into ``target`` (numba's cache folder for
    ``kernels.py``) where it has no file of that name; how many were copied. Never
    raises: a cache that cannot be seeded is compiled into as before."""
    if not KERNELS.is_dir():
        return 0
    copied = 0
    try:
        target.mkdir(parents=True, exist_ok=True)
        for source in KERNELS.iterdir():
            destination = target / source.name
            if source.is_file() and not destination.exists():
                temporary = destination.with_name(destination.name + ".seeding")
                shutil.copyfile(source, temporary)
                temporary.replace(destination)  # atomic: a concurrent process sees all of it or none
                copied += 1
    except OSError:
        return copied
    return copied
