"""The dense model behind the ANN index: where it is, whether its files are intact, and the
index for a store built or loaded with it.

Why here and not in :mod:`citewise.indexer.ann`: the index is a store-side structure that takes
any encoder; knowing the shipped model and its ONNX encoder is the recommender's business
(``indexer`` never imports ``models``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from citewise import deprecated
from citewise.errors import CitewiseError
from citewise.indexer.ann import AnnIndex, Progress, index_folder
from citewise.indexer.index_files import file_sha256
from citewise.indexer.store import Store

from .citation_prior import store_outgrows_cited_as

log = logging.getLogger(__name__)


class ModelError(CitewiseError):
    """An installed model folder that cannot be used (message names the file and the fix)."""


# What a model folder's manifest may say it is (``"kind"``): the shipped dense model
# (models/dense), the static paper encoder distilled from it (models/static), or a HAtten folder
# written by ``python -m training export`` (legacy, no longer shipped), or the static bag re-weighted
# by attention (``attention-bag``: models/static_attention, the default since issue 26).
KINDS = ("biencoder", "static", "hatten", "attention-bag")
FIX = "reinstall the model (or point CITEWISE_DENSE_MODEL at a good copy)"


def _shipped(name: str) -> Path:
    """A model folder shipped inside the package (``models/<name>``)."""
    return Path(__file__).resolve().parent / name


def default_model_dir() -> Path:
    """The dense model: ``$CITEWISE_DENSE_MODEL`` when set (a folder, or a shipped model's name:
    ``static``, the bag alone; ``dense``, the fine-tuned bi-encoder, ~150 papers/s, half an hour for
    110k papers), else ``models/static_attention`` (issue 26): the static bag of word pieces distilled
    from the bi-encoder, each piece's weight re-scaled by attention over its context (HAtten's
    pooling; 1,300+ papers/s, a 110k store embedded and indexed in under 80 s), queries by the
    bi-encoder, so every store is embedded and the dense list fused by default. It measured better
    than the bag alone fused on ACM-CR dev (R@10 0.507 against 0.496, MRR 0.387 against 0.370) and
    the same on the ACL split (docs/dense-prefetch.md). ``$CITEWISE_HATTEN_MODEL``, the variable's
    old name, still works for one release (with a notice). Which model a given store gets, the
    bi-encoder itself for a small one, is :func:`model_dir_for`'s choice."""
    env = deprecated.env("CITEWISE_DENSE_MODEL")
    if env:
        # A shipped model by name (``static_attention``, ``static``, ``dense``) unless a folder of
        # that name exists where the user is.
        shipped = _shipped(env)
        if Path(env).name == env and not Path(env).exists() and (shipped / "manifest.json").exists():
            return shipped
        return Path(env)
    return _shipped("static_attention")


# Issue 26, item 4: a store this small (a user's own .bib, a few thousand papers) has its papers
# embedded by the bi-encoder itself rather than by its distilled bag: ~40 s at ~130 papers/s on two
# cores, and the vectors the bag only approximates (same query encoder, same fusion weight). On the
# ACM-CR own-library protocol (~315-paper libraries) MRR 0.618 -> 0.633 (paired p 0.04), R@1 0.388
# -> 0.406 (docs/evaluation.md). A store the bi-encoder embedded keeps it while it grows, up to
# LARGE_STORE_PAPERS (the new papers alone are embedded); past that, its next index re-embeds it
# with the fast model (80 s for 110k papers), so a big import never costs a long embedding.
SMALL_STORE_PAPERS = 5_000
LARGE_STORE_PAPERS = 10_000


def _built_with(store: Store) -> str:
    """The model hash the store's embedding index was built with ('' when it has none)."""
    try:
        meta = json.loads((index_folder(store) / "meta.json").read_text())
    except (OSError, ValueError):
        return ""
    return str(meta.get("model_hash", "")) if isinstance(meta, dict) else ""


def _biencoder_hash(folder: Path) -> str:
    from .biencoder_onnx import manifest_hash

    try:
        return manifest_hash(json.loads((folder / "manifest.json").read_text()))
    except (OSError, ValueError):
        return ""


def model_dir_for(store: Store, building: bool = False) -> Path:
    """The dense model of ``store`` under the defaults: ``$CITEWISE_DENSE_MODEL`` when set, else by
    the store's size (:data:`SMALL_STORE_PAPERS`): the bi-encoder for a small store, the fast
    attention bag for the rest (:func:`default_model_dir`).

    Serving (``building`` False) reads what the store's index was built with, so a store indexed
    before a size rule or a release changed stays served until its next index; ``citewise index``
    and the server's reindex (``building``) apply the rule and re-embed when it changed."""
    fast = default_model_dir()
    full = _shipped("dense")
    if deprecated.env("CITEWISE_DENSE_MODEL") or not (full / "manifest.json").exists():
        return fast
    built = _built_with(store)
    on_full = bool(built) and built == _biencoder_hash(full)
    if not building and built:
        return full if on_full else fast
    papers = store.count()
    if papers <= SMALL_STORE_PAPERS or (on_full and papers <= LARGE_STORE_PAPERS):
        return full
    return fast


def model_kind(manifest: object, folder: Path) -> str:
    """The manifest's ``"kind"``, one of :data:`KINDS`; :class:`ModelError` otherwise.

    Why an error and no default: a manifest without a kind used to be served as HAtten, so a
    bi-encoder folder with a damaged or hand-edited manifest loaded into the wrong encoder and
    failed far from the cause (or embedded wrong vectors)."""
    kind = manifest.get("kind") if isinstance(manifest, dict) else None
    if kind in KINDS:
        return kind
    got = 'has no "kind"' if kind is None else f'has the unknown "kind" {json.dumps(kind)}'
    raise ModelError(
        f"{folder / 'manifest.json'}: the model manifest {got} (one of {', '.join(map(json.dumps, KINDS))} "
        'says which encoder reads the folder); for a HAtten folder exported before this release add "kind": '
        f'"hatten" to it, otherwise {FIX}'
    )


def make_encoder(folder: Path):
    """The encoder a model folder's manifest names (``"kind"``): ``"biencoder"``, ``"static"``
    (papers by the distilled bag of word pieces, queries by its bi-encoder) or ``"hatten"``;
    :class:`ModelError` for a manifest without a known kind."""
    kind = model_kind(json.loads((folder / "manifest.json").read_text()), folder)
    if kind == "static":
        from .static_encoder import StaticEncoder

        return StaticEncoder(folder)
    if kind == "biencoder":
        from .biencoder_onnx import BiEncoder

        return BiEncoder(folder)
    if kind == "attention-bag":
        from .attention_bag import AttentionBagEncoder

        return AttentionBagEncoder(folder)
    from .hatten_onnx import HattenEncoder  # kind "hatten"

    return HattenEncoder(folder)


def open_index(
    store: Store, model_dir: str | os.PathLike[str] | None = None, *, building: bool = False, **kwargs
) -> AnnIndex | None:
    """The store's AnnIndex for a model folder (not built yet; by default the store's own model,
    :func:`model_dir_for`), or None when no model is installed."""
    folder = Path(model_dir) if model_dir else model_dir_for(store, building)
    if not (folder / "manifest.json").exists():
        return None
    verify_model(folder)
    return AnnIndex(store, make_encoder(folder), **kwargs)


_VERIFIED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, per process


def verify_model(folder: Path) -> dict:
    """The model's manifest, after checking every file it lists (SHA-256, and the total size).

    Why: a half-copied or swapped weight file would otherwise load and embed silently wrong
    vectors (or crash onnxruntime). Raises :class:`ModelError` naming the file and the fix."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        files = manifest.get("files", {}) if isinstance(manifest, dict) else None
        if not isinstance(files, dict):
            raise ValueError("no 'files' table")
    except (OSError, ValueError) as exc:
        raise ModelError(f"{folder / 'manifest.json'}: unreadable model manifest ({exc}); {FIX}") from exc
    model_kind(manifest, folder)
    total = 0
    for name, want in files.items():
        path = folder / name
        try:
            st = path.stat()
        except OSError as exc:
            raise ModelError(
                f"{path}: model file listed in manifest.json is missing ({exc.strerror}); {FIX}"
            ) from exc
        total += st.st_size
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in _VERIFIED:
            _VERIFIED[key] = file_sha256(path)
        if _VERIFIED[key] != want:
            raise ModelError(
                f"{path}: does not match its manifest (sha256 {_VERIFIED[key][:12]}..., "
                f"expected {str(want)[:12]}...); {FIX}"
            )
    want_total = manifest.get("size_bytes")
    if isinstance(want_total, int) and want_total != total:
        raise ModelError(f"{folder}: model files total {total} bytes, manifest.json says {want_total}; {FIX}")
    # A static model embeds queries with another; a distilled HAtten adds a static model's bag.
    for role, field in (("query model", "query_model"), ("bag model", "bag_model")):
        if isinstance(manifest.get(field), str):
            other = (folder / manifest[field]).resolve()
            if not (other / "manifest.json").exists():
                raise ModelError(f"{folder}: its {role} {other} is missing; {FIX}")
            verify_model(other)
    return manifest


def ranking_uses_embeddings(
    store: Store, prefetch: str = "auto", model_dir: str | os.PathLike[str] | None = None
) -> bool:
    """Whether the ranking of ``store`` under ``prefetch`` would read the dense index, so that
    indexing spends time embedding papers only then (~85 s of the ~200 s an ACM-CR index takes).

    ``dense``/``hybrid`` use it; ``bm25`` never does; ``auto`` does when the installed model's
    manifest asks for embedding every store (``embed_by_default``; older manifests: their
    ``fuse_by_default``), or when the store already has an embedding index (someone opted in with
    ``citewise index --embed``: it is kept up to date and, for a model whose fusion measured
    better, used). The shipped bi-encoder is fused by default but not embedded by default: on two
    cores it embeds ~100 papers/s, minutes for a big store, so that is the user's choice.
    A store that knows how its papers are cited is embedded only where it gets its ``cited-as``
    list: there the paper list answers the sentences that list steps aside for
    (``prefetch.Prefetcher.source_lists``); a store citing more papers than the list holds
    (``citation_prior.store_outgrows_cited_as``) is ranked by BM25 over the citing texts with the
    dense list left out, so embedding it would be work for nothing. The default model's manifest decides for the whole
    family: a small store embedded by the bi-encoder (:func:`model_dir_for`) is embedded because
    the fast model is.
    """
    if prefetch in ("dense", "hybrid"):
        return True
    if prefetch != "auto":
        return False
    folder = Path(model_dir) if model_dir else default_model_dir()
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return False  # no model (or an unreadable one): nothing the ranking could use
    if (
        isinstance(manifest, dict)
        and manifest.get("embed_by_default", manifest.get("fuse_by_default", False))
        and not store_outgrows_cited_as(store)
    ):
        return True
    return (index_folder(store) / "meta.json").exists()


class _BatchProgress:
    """Progress per encoder batch (a few dozen papers) inside the index's chunks (2,048 papers).

    Why: the index reports once a chunk is embedded and written, which is a minute of the
    bi-encoder on two cores (a small store's model), so its bar sat at 0% for the whole first
    chunk. The encoder's batches move the count between the chunk reports; each chunk report
    resets it to the papers whose vectors are written."""

    def __init__(self, progress: Progress, on_embedded: Callable[[], None] | None = None) -> None:
        self.progress = progress
        self.on_embedded = on_embedded
        self.written = self.within = self.total = 0

    def chunk(self, done: int, total: int) -> None:
        """The index's own report: ``done`` papers embedded and written; the last one (all of
        them) starts the graph's build, which ``on_embedded`` hears of."""
        self.written, self.within, self.total = done, 0, total
        self.progress(done, total)
        if done >= total and self.on_embedded is not None:
            on_embedded, self.on_embedded = self.on_embedded, None
            on_embedded()

    def batch(self, n: int) -> None:
        """The encoder's: ``n`` more papers of the current chunk embedded."""
        self.within += n
        self.progress(min(self.written + self.within, self.total), self.total)


class _ReportingEncoder:
    """The index's encoder, telling :class:`_BatchProgress` of each batch it embeds; everything
    else (``model_hash``, ``dim``, queries) is the encoder's own."""

    def __init__(self, encoder, on_batch) -> None:
        self._encoder = encoder
        self._on_batch = on_batch

    def __getattr__(self, name: str):
        return getattr(self._encoder, name)

    def encode_papers(self, papers):
        return self._encoder.encode_papers(papers, on_batch=self._on_batch)


def build_index(
    store: Store,
    progress: Progress | None = None,
    model_dir: str | os.PathLike[str] | None = None,
    on_embedded: Callable[[], None] | None = None,
    **kwargs,
) -> dict | None:
    """What ``citewise index`` calls after an import: embed new papers, update the ANN index.
    ``progress(done, total)`` hears of every encoder batch, not only of every written chunk;
    ``on_embedded()`` of the end of the embedding, when the nearest-neighbour graph's build
    begins (minutes of one library call on a big store: the caller shows a phase of its own)."""
    index = open_index(store, model_dir, building=True, **kwargs)
    if index is None:
        return None
    if progress is None:
        return index.build()
    tracker = _BatchProgress(progress, on_embedded)
    index.encoder = _ReportingEncoder(index.encoder, tracker.batch)
    return index.build(tracker.chunk)


def load_dense_source(store: Store, model_dir: str | os.PathLike[str] | None = None) -> AnnIndex | None:
    """The dense source for serving: only when an index for the current model already exists
    (a model change needs `citewise index`, which can take minutes; serving never starts that).
    Either kind of ANN index is opened as ``citewise index`` built it (``meta.json``'s ``kind``):
    the float32 usearch index in memory, or the int8 one memory-mapped."""
    try:
        index = open_index(store, model_dir)
    except ModelError as exc:
        log.warning("%s; semantic (dense) search is off until then", exc)
        return None
    if index is None or not index.load():
        return None
    return index
