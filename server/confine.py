"""Which files the language server may read and write: one rule, used wherever it touches a file.

The promise (docs/language-server.md, "Only your files"): a draft, a workspace or a client's
command cannot make the server read or write outside what the user gave it. The rule:

* A path is judged by where it really leads: symlinks are resolved (:func:`real`) before any
  decision, so a ``.bib`` in the workspace that links outside it (git stores symlinks, a cloned
  repository can carry one) is outside.
* Reads: only regular files (not a FIFO, which would block, nor ``/dev/zero``, which never ends),
  at most a size cap (:data:`MAX_BIB_BYTES`, :data:`MAX_TEXT_BYTES`): :func:`read_bounded`.
* Where: inside the workspace or the draft's folder, on ``BIBINPUTS`` (reads only), or a file the
  user named in the ``bibliography`` setting (a shared ``~/papers/library.bib`` on purpose).
* Writes: only to a file whose real path is inside the workspace or the draft's folder, or that
  the user named in the ``bibliography`` setting; an existing target must be a regular file, a new
  one's real folder must be inside (:meth:`PathRule.may_write`).

No LSP types: the server builds a :class:`PathRule` per draft, ``citewise`` commands (where the
user names every file) use none.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MAX_BIB_BYTES = 256 * 2**20  # a reference manager's 50,000-entry export is ~72 MB
MAX_TEXT_BYTES = 32 * 2**20  # a draft, or a file it \input's


def real(path: str | os.PathLike[str]) -> str:
    """Where ``path`` really leads: absolute, ``..`` folded, every symlink resolved."""
    return os.path.realpath(os.path.abspath(os.path.expanduser(str(path))))


def inside(path: str | os.PathLike[str], roots: Iterable[str]) -> bool:
    """Whether ``path`` really lies in one of ``roots`` (themselves real paths)."""
    p = real(path)
    return any(p == r or p.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def regular_size(path: str | os.PathLike[str]) -> int | None:
    """The size of a regular file at ``path`` (links followed); None for anything else or nothing."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def read_bounded(path: str | os.PathLike[str], cap: int) -> str | None:
    """The text of a regular file of at most ``cap`` bytes (None otherwise, said in the log).

    The cap is also enforced while reading: a file that grows past it meanwhile is not read whole."""
    size = regular_size(path)
    if size is None:
        if os.path.lexists(path):
            log.warning("%s: not a regular file; not read", path)
        return None
    if size > cap:
        log.warning(
            "%s: %d MB, more than the %d MB read from such a file; not read", path, size >> 20, cap >> 20
        )
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(cap + 1)
    except OSError as exc:
        log.info("cannot read %s: %s", path, exc)
        return None
    if len(data) > cap:
        log.warning("%s grew past %d MB while read; not read", path, cap >> 20)
        return None
    return data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class PathRule:
    """Where the server may write for one workspace: ``roots`` (real paths of the workspace and
    the draft's folder) and ``named`` (real paths of the files the user named in settings)."""

    roots: tuple[str, ...]
    named: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, roots: Iterable[str | os.PathLike[str]], named: Iterable[str | os.PathLike[str]] = ()
    ) -> PathRule:
        return cls(tuple(real(r) for r in roots), tuple(real(n) for n in named))

    def may_write(self, path: str | os.PathLike[str]) -> bool:
        """Whether the server may write ``path`` (create it when missing)."""
        target = real(path)
        if not (target in self.named or inside(target, self.roots)):
            return False
        if os.path.lexists(target):
            return regular_size(target) is not None
        return inside(Path(target).parent, self.roots) or target in self.named
