"""The search engine behind the recommender's first stage: local (default) or Milvus.

Why an interface: the prefetch needs only a handful of operations -- top-k BM25 for a query text
(or a bag of query terms), with some papers excluded; the terms of a text; feedback terms for
pseudo-relevance feedback; a count. The local engine answers them from the in-memory BM25 index
saved beside the SQLite store (one machine, up to about a million papers); Milvus answers them
from a collection that a cluster (a lab, a 100M-paper corpus) or an embedded Milvus Lite file
holds. Papers' metadata and BibTeX stay in the SQLite store either way: an engine returns paper
ids, the store turns them into papers (docs/scaling.md has the measurement behind that choice).

Engine specs (``--engine`` and the ``engine`` setting):

- ``local``: the in-memory BM25 index (and the usearch dense index) beside the store;
- ``milvus://HOST:PORT/COLLECTION``: a Milvus server or cluster (``milvus+https://`` for TLS;
  ``$CITEWISE_MILVUS_TOKEN`` is sent as the token when set);
- ``milvus-lite:PATH.db`` or ``milvus-lite:PATH.db#COLLECTION``: an embedded Milvus Lite file
  (one process at a time may open it; Milvus Lite requires the ``.db`` ending).

Either Milvus form may end in ``?shards=N``: the number of shards a collection is created with
(Milvus's default, 1, without it). Shards spread a cluster's inserts over its data nodes; they
apply only when ``citewise index --engine`` creates the collection, and Milvus Lite (one process)
ignores them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from citewise.errors import CitewiseError

from .bm25 import BM25Index

if TYPE_CHECKING:
    import numpy as np

LOCAL = "local"
DEFAULT_COLLECTION = "citewise"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
SPEC_FORMS = "local, milvus://HOST:PORT/COLLECTION[?shards=N], or milvus-lite:PATH.db[#COLLECTION]"
_SHARDS_RE = re.compile(r"\?shards=([^?#/]*)$")
MAX_SHARDS = 64  # Milvus's own limit on a collection's shards (proxy.maxShardNum)

Progress = Callable[[int, int], None]  # (done, total)


class EngineError(CitewiseError):
    """An engine that cannot be used (a bad spec, Milvus unreachable, pymilvus missing): one
    line saying what and how to fix it, printed by the CLI and shown by the language server."""


@dataclass(frozen=True)
class EngineSpec:
    """A parsed ``--engine`` value."""

    kind: str  # "local" | "milvus" | "milvus-lite"
    uri: str = ""  # http(s)://host:port, or the Milvus Lite file path
    collection: str = DEFAULT_COLLECTION
    shards: int = 0  # shards of a collection citewise creates (0: Milvus's default)

    @property
    def is_local(self) -> bool:
        return self.kind == LOCAL

    def __str__(self) -> str:
        shards = f"?shards={self.shards}" if self.shards else ""
        if self.kind == "milvus-lite":
            return f"milvus-lite:{self.uri}#{self.collection}{shards}"
        if self.kind == "milvus":  # the spec again, so that str(parse_engine(x)) parses to the same
            scheme, _, host = self.uri.partition("://")
            return f"{'milvus+https' if scheme == 'https' else 'milvus'}://{host}/{self.collection}{shards}"
        return LOCAL


def parse_engine(spec: str | None) -> EngineSpec:
    """The engine a spec names; raises :class:`EngineError` listing the accepted forms.

    Why an explicit ``milvus-lite:`` prefix rather than "any path ending in .db": a store path
    given by mistake (``papers.sqlite``) must not silently become a new Milvus Lite database."""
    text = (spec or LOCAL).strip()
    if text == LOCAL:
        return EngineSpec(LOCAL)
    text, shards = _shards(spec, text)
    if text.startswith("milvus-lite:"):
        path, _, name = text[len("milvus-lite:") :].partition("#")
        if not path.endswith(".db"):
            raise EngineError(f"--engine {spec}: a Milvus Lite file name ends in .db (milvus-lite:PATH.db)")
        path = str(Path(path).expanduser().absolute())
        return EngineSpec("milvus-lite", path, _collection(spec, name), shards)
    for scheme, http in (("milvus://", "http://"), ("milvus+https://", "https://")):
        if text.startswith(scheme):
            host, _, name = text[len(scheme) :].partition("/")
            if not host or ":" not in host:
                raise EngineError(f"--engine {spec}: expected milvus://HOST:PORT/COLLECTION")
            return EngineSpec("milvus", http + host, _collection(spec, name.strip("/")), shards)
    raise EngineError(f"--engine {spec}: unknown engine (expected {SPEC_FORMS})")


def _shards(spec: str | None, text: str) -> tuple[str, int]:
    """The spec without its ``?shards=N`` ending, and N (0 without one)."""
    found = _SHARDS_RE.search(text)
    if found is None:
        if "?" in text:
            raise EngineError(f"--engine {spec}: the one option is ?shards=N at the end")
        return text, 0
    value = found.group(1)
    if not value.isdigit() or not 1 <= int(value) <= MAX_SHARDS:
        raise EngineError(f"--engine {spec}: shards must be a whole number from 1 to {MAX_SHARDS}")
    return text[: found.start()], int(value)


def _collection(spec: str | None, name: str) -> str:
    name = name or DEFAULT_COLLECTION
    if not _NAME_RE.match(name):
        raise EngineError(
            f"--engine {spec}: collection name {name!r} must start with a letter or _ and hold only "
            "letters, digits and _"
        )
    return name


class SearchEngine(Protocol):
    """What the prefetch asks of an engine: the operations it always asked of the local BM25 index
    (:class:`~citewise.indexer.bm25.BM25Index` is the local engine as it stands, so the default
    path changes nothing), plus ``exclusion``, which :func:`exclusion_for` asks of an engine
    that is not the local index (the local one takes a boolean mask instead). ``tokenizer`` gives the query terms the
    engine scores (local: stems; Milvus: words, which its own analyzer stems); ``mask`` is what
    :func:`exclusion_for` prepared once for an excluded-id set (a numpy mask, a filter expression),
    since the same set serves every query of an evaluation or a draft."""

    def tokenizer(self, text: str) -> list[str]: ...

    def search(
        self, text: str | Counter[str], k: int = 10, mask: Any = None, dedupe: bool = False
    ) -> list[tuple[int, float]]: ...

    def expansion_terms(self, texts: list[str], n_terms: int = 20) -> Counter[str]: ...

    def citing_count(self, paper_ids: list[int]) -> np.ndarray: ...

    def exclusion(self, excluded: Collection[int]) -> Any: ...


def exclusion_for(engine: BM25Index | SearchEngine, excluded: Collection[int]) -> Any:
    """What ``engine.search(..., mask=...)`` takes to leave ``excluded`` paper ids out: the local
    index's boolean mask of allowed documents, or the remote engine's own ``exclusion``."""
    if isinstance(engine, BM25Index):
        return engine.mask_for(excluded, allowed=False)
    return engine.exclusion(excluded)
