"""Crash-safe files for the indexes kept beside a store (BM25 folder, dense ANN files).

Why: ``citewise index`` and the server's reindex can be killed at any instant (kill -9, a laptop
lid, an OOM). Every index file is therefore written under a temporary name and renamed into
place, its size and SHA-256 are recorded so a damaged file is detected when it is opened, and
temporary files of dead processes are cleaned up by the next writer.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
from pathlib import Path

log = logging.getLogger(__name__)


def pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


_ORPHAN_RE = re.compile(r"\.(tmp|old)(\d{1,10})(?:\.[A-Za-z0-9_]{1,32})?")


def orphans(folder: Path) -> list[tuple[str, Path]]:
    """Sibling folders of a save by a process that no longer runs (kind "tmp" or "old")."""
    out: list[tuple[str, Path]] = []
    try:
        siblings = list(folder.parent.glob(glob_escape(folder.name) + ".*"))
    except OSError:
        return out
    for path in siblings:
        m = _ORPHAN_RE.fullmatch(path.name[len(folder.name) :])
        if m and path.is_dir() and not pid_alive(int(m.group(2))):
            out.append((m.group(1), path))
    return out


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def restore_orphan(folder: Path) -> None:
    """A kill between the two renames of an atomic folder save (``BM25Index.save``) leaves the complete old index
    under ``.old<pid>``: put it back (it is stale, and served with a delta or rebuilt as usual)."""
    if folder.exists():
        return
    for kind, path in orphans(folder):
        if kind == "old" and (path / "meta.json").exists():
            try:
                path.rename(folder)
                log.info("%s: restored the search index left by an interrupted save", folder)
            except OSError:
                pass
            return


def clean_orphans(folder: Path) -> None:
    for _, path in orphans(folder):
        shutil.rmtree(path, ignore_errors=True)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks (hashlib releases the GIL on large updates)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def remove_dead_temporaries(folder: Path, pattern: str = "*.tmp*") -> None:
    """Files matching ``pattern`` whose name ends in ``tmpPID`` (written under a temporary name by
    a process killed before renaming them): removed only when that process is gone, since a live
    one may still be writing its own."""
    for path in folder.glob(pattern):
        pid = path.name.rsplit("tmp", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            path.unlink(missing_ok=True)


def replace_file(tmp: Path, final: Path) -> None:
    """Flush ``tmp`` to disk and rename it over ``final`` (readers see the old or the new file)."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)
