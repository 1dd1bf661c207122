"""Vectors by 64-bit key, appended to two files beside a store, for work that must survive a kill.

Why: embedding is the slow part of keeping a store's models current (the citing texts of a
citation store, the teacher's paper vectors of a big one), and a process can be killed at any
instant. Appending each batch (vectors first, then their keys) means a key never names a missing
vector; a torn tail (a kill mid-append) is cut when the files are next read or written, and what
was embedded before it is kept. ``NAME.model`` records the weights the vectors were made with:
vectors of other (or unknown) weights are dropped, never mixed. Appends from several processes
(two editors' servers on one store) take an exclusive ``flock`` on ``NAME.lock``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .index_files import replace_file


def text_key(*parts: object) -> int:
    """A stable 64-bit key of ``parts`` (whitespace in strings normalised): Python's ``hash`` of a
    string changes from process to process, and these keys are kept on disk."""
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update((" ".join(part.split()) if isinstance(part, str) else repr(part)).encode())
        h.update(b"\0")
    return int.from_bytes(h.digest(), "little", signed=True)


class VectorCache:
    """``NAME.u64`` (keys) and ``NAME.f32`` (vectors, ``dim`` float32 each) in ``folder``."""

    def __init__(self, folder: Path, name: str, dim: int, model_hash: str) -> None:
        self.folder, self.name, self.dim, self.model_hash = folder, name, dim, model_hash
        self.keys_path = folder / f"{name}.u64"
        self.vecs_path = folder / f"{name}.f32"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / f"{self.name}.lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _whole(self) -> int:
        """How many entries both files hold whole."""
        if not self.keys_path.exists() or not self.vecs_path.exists():
            return 0
        return min(self.keys_path.stat().st_size // 8, self.vecs_path.stat().st_size // (4 * self.dim))

    def _cut_to(self, n: int) -> None:
        for path, size in ((self.keys_path, 8 * n), (self.vecs_path, 4 * self.dim * n)):
            if path.exists() and path.stat().st_size != size:
                with open(path, "r+b") as fh:
                    fh.truncate(size)

    def _made_by(self) -> str:
        """The weights' hash the cached vectors were made with ('' when unknown)."""
        try:
            return (self.folder / f"{self.name}.model").read_text().strip()
        except OSError:
            return ""

    def _own_weights(self) -> None:
        """Drop vectors made with other weights (or unknown ones), then stamp ours."""
        if self._made_by() != self.model_hash:
            stamp = self.folder / f"{self.name}.model"
            self.keys_path.unlink(missing_ok=True)
            self.vecs_path.unlink(missing_ok=True)
            tmp = stamp.with_name(f"{stamp.name}.tmp{os.getpid()}")
            tmp.write_text(self.model_hash + "\n")
            replace_file(tmp, stamp)

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, vectors) of every whole entry made with these weights (none of others'); under
        the lock, so a rewrite by :meth:`keep_last` is never seen half done."""
        if not self.keys_path.exists():
            return np.zeros(0, np.int64), np.zeros((0, self.dim), np.float32)
        with self._locked():
            return self._read()

    def _read(self) -> tuple[np.ndarray, np.ndarray]:
        n = self._whole() if self._made_by() == self.model_hash else 0
        if n == 0:
            return np.zeros(0, np.int64), np.zeros((0, self.dim), np.float32)
        keys = np.fromfile(self.keys_path, dtype=np.int64, count=n)
        vecs = np.fromfile(self.vecs_path, dtype=np.float32, count=n * self.dim).reshape(n, self.dim)
        return keys, vecs

    def append(self, keys: list[int] | np.ndarray, vecs: np.ndarray) -> None:
        """Add entries: under the lock, other weights' vectors dropped and a torn tail cut first."""
        if not len(keys):
            return
        with self._locked():
            self._own_weights()
            self._cut_to(self._whole())
            with open(self.vecs_path, "ab") as fh:
                fh.write(np.ascontiguousarray(vecs, dtype=np.float32).tobytes())
            with open(self.keys_path, "ab") as fh:
                fh.write(np.asarray(keys, dtype=np.int64).tobytes())

    def keep_last(self, n: int) -> None:
        """Rewrite the files with only the last ``n`` entries (a bounded cache), atomically."""
        with self._locked():
            keys, vecs = self._read()
            if len(keys) <= n:
                return
            for path, data in ((self.vecs_path, vecs[-n:]), (self.keys_path, keys[-n:])):
                tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
                data.tofile(tmp)
                replace_file(tmp, path)
