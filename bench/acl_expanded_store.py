"""Build the ACL evaluation store with citation expansion, leaving out what the dev queries know.

The ACL dev split is the ScisummNet sentences of citing papers published in 2013 and 2014. The
store may know how papers are cited only as a user's store would have known before those papers
were written (``evaluation/honest_split.py``): no edge and no sentence whose citing paper is of
2013 or later or is a dev paper, from either ``acl-citation-edges.tsv`` or
``scisummnet-citances.jsonl``. ``--leaky`` builds the earlier store (only the dev years' citers
left out, 2015's kept), for the parity check with figures measured on it. Everything else is
imported through the same importer as ``citewise index FILE`` (``indexer/citations.py``).

    python bench/acl_expanded_store.py --base data/acl.sqlite --out data/acl-expanded.sqlite
    citewise eval acl-citances --store data/acl-expanded.sqlite \\
        --citances ../shared/data/citations/scisummnet-citances.jsonl \\
        --collection ../shared/data/acl-anthology/xml --no-rerank
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from citewise.evaluation.honest_split import HonestSplit, honest_split, leaky_keep
from citewise.indexer import bm25_files
from citewise.indexer.citations import CitationEdge, import_citation_file
from citewise.indexer.store import Store
from citewise.models import citing_vectors, dense_index
from citewise.models.citation_prior import knows_citations

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "citations"


@functools.lru_cache(maxsize=1)
def _honest() -> HonestSplit:
    return honest_split(DATA / "scisummnet-citances.jsonl")


def not_dev(edge: CitationEdge) -> bool:
    """Keep an edge only when its citing paper predates the dev years and is not a dev paper (the
    honest split of ``evaluation/honest_split.py``, over the shared ScisummNet file)."""
    return _honest().keep(edge)


def build(base: Path, out: Path, files: list[Path], keep: Callable[[CitationEdge], bool]) -> dict:
    """Copy ``base`` to ``out`` (a consistent snapshot, through SQLite's backup) and import the
    citation ``files`` into it, dev-year citing papers left out; then build its BM25 index and
    the cited papers' citing-text vectors and the papers' dense index, as ``citewise index`` does."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(out) + suffix).unlink(missing_ok=True)
    for folder in (".bm25", ".citing", ".dense"):
        shutil.rmtree(out.with_name(out.name + folder), ignore_errors=True)
    src, dst = sqlite3.connect(base), sqlite3.connect(out)
    src.backup(dst)
    src.close()
    dst.close()
    store = Store(out)
    summary: dict = {"store": str(out), "files": {}}
    for path in files:
        t0 = time.perf_counter()
        kept = import_citation_file(store, path, keep=keep)
        summary["files"][path.name] = {"edges": kept, "seconds": round(time.perf_counter() - t0, 1)}
    t0 = time.perf_counter()
    index = bm25_files.load_or_build(store, allow_delta=False)
    summary["bm25_seconds"] = round(time.perf_counter() - t0, 1)
    summary["cited_papers"] = int((index.citing_counts > 0).sum())
    t0 = time.perf_counter()  # what `citewise index` embeds where a store knows citations
    summary["citing_vectors"] = citing_vectors.build_for(store, knows=knows_citations(index))
    summary["citing_vectors_seconds"] = round(time.perf_counter() - t0, 1)
    if dense_index.ranking_uses_embeddings(store):  # the papers too, as `citewise index` embeds them
        t0 = time.perf_counter()
        summary["embedding"] = dense_index.build_index(store)
        summary["embedding_seconds"] = round(time.perf_counter() - t0, 1)
    store.close()
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, default=Path("data/acl.sqlite"), help="the ACL XML store")
    ap.add_argument("--out", type=Path, default=Path("data/acl-expanded.sqlite"))
    ap.add_argument(
        "--files",
        type=Path,
        nargs="+",
        default=[DATA / "acl-citation-edges.tsv", DATA / "scisummnet-citances.jsonl"],
    )
    ap.add_argument(
        "--leaky",
        action="store_true",
        help="parity check only: leave out the dev years' citers but keep later ones (the earlier store)",
    )
    args = ap.parse_args()
    citances = next(
        (f for f in args.files if f.name.startswith("scisummnet-citances")),
        DATA / "scisummnet-citances.jsonl",
    )
    keep = leaky_keep if args.leaky else honest_split(citances).keep
    print(json.dumps(build(args.base, args.out, args.files, keep), indent=2))


if __name__ == "__main__":
    main()
