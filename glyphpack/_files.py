"""The one write primitive: replace a file atomically, so a crash leaves the old or the
new file and never a mix (used by the transcript store, the font cache and the CLI).

A temporary file in the same directory (``.NAME.XXXXXXXX.tmp``), written, fsynced,
renamed over the target, then the directory fsynced so the rename itself survives a
power cut. On any failure the temporary file is removed and the target is untouched.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

from ._errors import StoreError


def cache_dir() -> Path:
    """Where glyphpack caches what it can rebuild (compiled atlases, numba's compiled
    kernels): ``$GLYPHPACK_CACHE_DIR``, else the user cache directory. Never the
    installed package's folder: files left there outlive an uninstall."""
    explicit = os.environ.get("GLYPHPACK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "glyphpack"


def read_stored(path: Path) -> bytes | None:
    """A stored file's bytes (None: there is none); ``StoreError`` naming it if unreadable."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from None


#: ``tempfile.mkstemp`` draws 8 characters from this alphabet between prefix and suffix.
_RANDOM = "[a-z0-9_]{8}"


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically.

    Args:
        durable: fsync the file and its directory (a cache that can be rebuilt may
            skip it).

    Raises:
        OSError: the write failed; ``path`` is as it was and no temporary file is left.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file 0600; the result gets the mode a plain open() would give
        # it (the file's own if it exists, else 0666 less the umask).
        os.chmod(tmp, _mode_for(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def _read_umask() -> int:
    """The process's umask, read once at import: setting it to read it back is not
    thread-safe (a file another thread creates meanwhile would get no umask)."""
    umask = os.umask(0o22)
    os.umask(umask)
    return umask


_UMASK = _read_umask()


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_UMASK


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (no-op where directories cannot be opened)."""
    if os.name != "posix":  # pragma: no cover - directories cannot be opened for fsync elsewhere
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def stale_temporaries(path: Path) -> list[Path]:
    """Temporary files ``atomic_write`` leaves for ``path`` when its process dies.

    Matched exactly (the name, then mkstemp's 8 random characters), so the temporaries
    of ``a.json`` are never confused with those of ``a.json.x.json``.
    """
    own = re.compile(rf"\.{re.escape(path.name)}\.{_RANDOM}\.tmp")
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    return [path.parent / name for name in names if own.fullmatch(name)]
