"""The BM25 index on disk, beside its store: where it lives, its files (written atomically,
checked on load), and whether a saved index serves as it is, with a delta of what changed since,
or is rebuilt.

Why apart from :mod:`citewise.indexer.bm25`: that module ranks (tokens, impacts, scores); this one
decides what a process may trust after a crash, a kill or a concurrent import, which is where the
fault tests aim.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .bm25 import BM25Index, BM25Params, expanded_docs
from .bm25_build import DEFAULT_BUDGET_MB, build_index_folder, swap_in
from .index_files import clean_orphans, restore_orphan
from .mapped_pages import budget_for
from .store import Store

INDEX_VERSION = 3  # 3: the citing field and citing_counts
_ARRAYS = ("doc_ids", "offsets", "postings", "impacts", "citing_counts")

log = logging.getLogger(__name__)


def save_index(index: BM25Index, folder: str | os.PathLike[str]) -> None:
    """Write atomically: a complete new folder is renamed into place, so readers never see half.

    ``meta.json`` records every file's size, so a truncated file is caught on load. Folders
    left by a process killed mid-save (``.tmp<pid>.*``, ``.old<pid>``) are cleaned up here,
    and a complete old index orphaned between the two renames is put back by :func:`load_index`.
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    if index.layered:
        raise ValueError("save the base index only (rebuild to fold a delta in)")
    clean_orphans(folder)
    tmp = Path(tempfile.mkdtemp(prefix=f"{folder.name}.tmp{os.getpid()}.", dir=folder.parent))
    try:
        for name in _ARRAYS:
            np.save(tmp / f"{name}.npy", getattr(index, name))
        terms = [""] * len(index.vocab)
        for t, i in index.vocab.items():
            terms[i] = t
        (tmp / "terms.txt").write_text("\n".join(terms), encoding="utf-8")
        sizes = {f.name: f.stat().st_size for f in tmp.iterdir()}
        meta = {
            "version": INDEX_VERSION,
            "generation": index.generation,
            "params": index.params.__dict__,
            "avgdl": index.avgdl,
            "avgcl": index.avgcl,
            "built_at": index.built_at,
            "sizes": sizes,
        }
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        swap_in(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_index(folder: str | os.PathLike[str]) -> BM25Index | None:
    """The saved index, or None when missing, of another version, or damaged (logged)."""
    index, problem = load_checked(folder)
    if problem:
        log.warning("%s: search index damaged (%s); it is rebuilt on next use", folder, problem)
    return index


def load_checked(folder: str | os.PathLike[str]) -> tuple[BM25Index | None, str]:
    """(index, "") when sound; (None, "") when missing or of another version; (None, why) when
    damaged. Every structural invariant a search relies on is checked, so a truncated or
    corrupt file is reported and rebuilt instead of crashing a search with an IndexError."""
    folder = Path(folder)
    restore_orphan(folder)
    if not (folder / "meta.json").exists():
        return None, ""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if not isinstance(meta, dict):
            return None, "meta.json is not an object"
        if meta.get("version") != INDEX_VERSION:
            return None, ""
        for name, size in (meta.get("sizes") or {}).items():
            actual = (folder / name).stat().st_size
            if actual != size:
                return None, f"{name} has {actual} bytes, {size} expected"
        terms = (folder / "terms.txt").read_text(encoding="utf-8").split("\n")
        arrays = {name: _load_array(folder / f"{name}.npy") for name in _ARRAYS}
        problem = _check_arrays(arrays, len(terms))
        if problem:
            return None, problem
        vocab = {t: i for i, t in enumerate(terms)}
        if len(vocab) != len(terms) and len(terms) > 1:
            return None, "terms.txt repeats terms"
        index = BM25Index(
            arrays["doc_ids"],
            vocab,
            arrays["offsets"],
            arrays["postings"],
            arrays["impacts"],
            BM25Params(**meta["params"]),
            int(meta["generation"]),
        )
        index.avgdl, index.avgcl = float(meta["avgdl"]), float(meta.get("avgcl", 1.0))
        index.citing_counts = arrays["citing_counts"]
        index.built_at = float(meta["built_at"])
        index.mapped = budget_for([arrays["postings"], arrays["impacts"]], mapped_budget_mb())
        return index, ""
    except (OSError, ValueError, KeyError, TypeError, EOFError, UnicodeDecodeError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _check_arrays(arrays: dict[str, np.ndarray], n_terms: int) -> str:
    """Why the loaded arrays cannot be searched safely ("" when they can)."""
    ids, offsets, postings, impacts, counts = (arrays[n] for n in _ARRAYS)
    if counts.shape != ids.shape:
        return "citing_counts does not match the documents"
    if any(a.ndim != 1 for a in arrays.values()):
        return "an array is not one-dimensional"
    if offsets.shape[0] != n_terms + 1 and not (n_terms == 1 and offsets.shape[0] == 1):
        return f"{n_terms} terms but {offsets.shape[0] - 1} posting lists"
    if not np.issubdtype(offsets.dtype, np.integer) or not np.issubdtype(postings.dtype, np.integer):
        return "offsets or postings are not integers"
    if offsets[0] != 0 or offsets[-1] != postings.shape[0] or postings.shape[0] != impacts.shape[0]:
        return "posting offsets do not match the postings"
    if offsets.shape[0] > 1 and bool((np.diff(offsets) < 0).any()):
        return "posting offsets are not increasing"
    for lo in range(0, postings.shape[0], _CHECK_CHUNK):
        part = _chunk(postings, lo)
        if int(part.min()) < 0 or int(part.max()) >= ids.shape[0]:
            return "a posting points past the documents"
        if not bool(np.isfinite(_chunk(impacts, lo)).all()):
            return "impacts are not finite numbers"
    return ""


# Posting arrays bigger than this are memory-mapped, not read (about a million papers): the
# server's memory then holds the postings of the terms queries use, not the whole index (a
# ten-million-paper index is 4-5 GB of postings and impacts).
MMAP_BYTES = 256 * 1024 * 1024
_CHECK_CHUNK = 1 << 24


def _load_array(path: Path) -> np.ndarray:
    mapped = path.stem in ("postings", "impacts") and path.stat().st_size > MMAP_BYTES
    return np.load(path, allow_pickle=False, mmap_mode="r" if mapped else None)


def _chunk(arr: np.ndarray, lo: int) -> np.ndarray:
    """``arr[lo : lo + _CHECK_CHUNK]``; of a memory-mapped array, read from its file instead of
    through the mapping, so checking a 4 GB index does not make 4 GB of it this process's memory."""
    if isinstance(arr, np.memmap) and arr.filename:
        count = min(_CHECK_CHUNK, arr.shape[0] - lo)
        return np.fromfile(arr.filename, dtype=arr.dtype, count=count, offset=arr.offset + lo * arr.itemsize)
    return arr[lo : lo + _CHECK_CHUNK]


def index_folder(store: Store) -> Path:
    """Where a store's BM25 index lives: beside the SQLite file."""
    return store.path.with_name(store.path.name + ".bm25")


def saved_citing_counts(store: Store) -> np.ndarray | None:
    """The saved index's citation counts (papers citing each document), or None without a saved
    index: read without loading or checking the index, for decisions taken before a ranking
    loads it (whether embedding a store is worth its time)."""
    path = index_folder(store) / "citing_counts.npy"
    try:
        return np.load(path, allow_pickle=False, mmap_mode="r")
    except (OSError, ValueError):
        return None


MAX_DELTA = 5000  # a delta may always serve this many changed papers
DELTA_SHARE = 0.1  # ... or up to this share of the base


def max_delta(base_size: int) -> int:
    """How many changed papers a delta serves before a full rebuild is worth its time.

    A delta costs time in proportion to its own size, a rebuild to the whole store's (minutes at
    a million papers, for one 50k-entry .bib added). The delta is scored with the base's
    statistics (N, mean length, document frequencies), which stay representative while it is a
    small share of the store: hence a share, not a fixed count."""
    return max(MAX_DELTA, int(base_size * DELTA_SHARE))


def _with_store_delta(store: Store, index: BM25Index) -> BM25Index | None:
    """The saved base plus a delta for what changed in the store since, or None if too much did."""
    generation = store.generation
    changed = store.conn.execute(
        "SELECT id, title, abstract, keywords FROM papers WHERE updated_at > ? ORDER BY id LIMIT ?",
        (index.built_at, max_delta(index.size) + 1),
    ).fetchall()
    if len(changed) > max_delta(index.size):
        return None
    changed = list(expanded_docs(store, changed, index.params, [row[0] for row in changed]))
    present = np.fromiter((pid for (pid,) in store.conn.execute("SELECT id FROM papers")), dtype=np.int64)
    removed = index.base_ids[~np.isin(index.base_ids, present)]
    return index.with_delta(changed, removed.tolist(), generation)


def load_or_build(
    store: Store,
    params: BM25Params | None = None,
    on_doc: Callable[[], None] | None = None,
    save: bool = True,
    allow_delta: bool = True,
    on_merge: Callable[[int, int], None] | None = None,
) -> BM25Index:
    """The store's BM25 index: loaded; or the saved base plus a delta of what changed since (a
    few thousand papers at most); or rebuilt (and saved) when missing, built with other params,
    or far behind. ``allow_delta=False`` forces the full rebuild (``citewise index`` does).
    A rebuild's progress: ``on_doc()`` per paper, ``on_merge(done, total)`` per range of postings."""
    folder = index_folder(store)
    index, problem = load_checked(folder)
    if problem:
        log.warning("%s: search index damaged (%s); rebuilding it", folder, problem)
    want = params or BM25Params()
    if index is not None and index.generation == store.generation and index.params == want:
        return index
    if index is not None and allow_delta and index.params == want:
        layered = _with_store_delta(store, index)
        if layered is not None:
            return layered
    log.info("%s: building the search index (%d papers)", folder, store.count())
    t0 = time.perf_counter()
    if save:
        # Built on disk in bounded memory (indexer/bm25_build.py), then loaded as any saved index.
        try:
            stats = build_index_folder(
                store, folder, want, on_doc, budget_mb(), index_version=INDEX_VERSION, on_merge=on_merge
            )
            built, problem = load_checked(folder)
            if built is not None:
                built.build_seconds = time.perf_counter() - t0  # type: ignore[attr-defined]
                built.build_stats = stats  # type: ignore[attr-defined]
                return built
            log.warning("%s: the index just built does not load (%s); building in memory", folder, problem)
        except OSError as exc:  # a read-only folder: serve from memory, rebuild next time
            log.warning(
                "%s: could not save the search index (%s); it is rebuilt in memory on each start",
                folder,
                exc.strerror or exc,
            )
    index = BM25Index.from_store(store, want, on_doc)
    index.build_seconds = time.perf_counter() - t0  # type: ignore[attr-defined]
    return index


def budget_mb() -> int:
    """Working memory of a BM25 build, in MiB: ``$CITEWISE_INDEX_MEMORY_MB``, else 512 (the
    per-paper arrays, 20 bytes a paper, and the vocabulary come on top)."""
    return _mib_from_env("CITEWISE_INDEX_MEMORY_MB", DEFAULT_BUDGET_MB)


# The most of a memory-mapped index (with the process's other mapped files: libraries, ~0.2 GB)
# that a process keeps mapped (indexer/mapped_pages.py): with the ten-million-paper server's own
# 0.9 GB, its resident size stays under 3 GB.
DEFAULT_MAPPED_MB = 2048


def mapped_budget_mb() -> int:
    """How much of a memory-mapped index a process keeps mapped, in MiB:
    ``$CITEWISE_MAPPED_INDEX_MB``, else 2,048."""
    return _mib_from_env("CITEWISE_MAPPED_INDEX_MB", DEFAULT_MAPPED_MB)


def _mib_from_env(name: str, default: int) -> int:
    """A whole number of MiB (at least 16) from the environment, else ``default`` (logged when
    the variable is set but not a number)."""
    raw = os.environ.get(name, "")
    try:
        return max(16, int(raw)) if raw.strip() else default
    except ValueError:
        log.warning("%s=%r is not a whole number of MiB; using %d", name, raw, default)
        return default
