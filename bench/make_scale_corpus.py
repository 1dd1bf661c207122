"""Generate papers for the scale benches: realistic text, reproducible from a seed.

A million-paper store is the real ACM-CR and ACL records (import them from ``shared/data`` as
usual) plus the papers this script writes as JSON Lines. Each generated paper is made of real
text recombined, so term statistics (vocabulary, document frequencies, lengths) stay those of
real scientific abstracts, which is what BM25's cost and quality depend on:

- title: the first half of one real title and the second half of another;
- abstract: 3-8 sentences drawn from different real abstracts (none for the same share of papers
  as in the source stores: ACL papers mostly have none);
- authors, venue, year: drawn from real papers; a DOI under the unassigned prefix ``10.99999``;
- references: earlier generated or real papers, as many a paper as the ACL store has citation
  edges (116,976 edges over 61,686 papers: 1.9 a paper), and a citing sentence (a real abstract
  sentence) on as many of them as the ACL store's citing sentences are of its edges (14,987 of
  116,976: 12.8%), so the citations table and the citing field grow as a real store's do.

    python bench/make_scale_corpus.py --store data/acm-cr.sqlite --store data/acl.sqlite \\
        --papers 828745 --seed 7 --out runs/scale/generated.jsonl

The same stores, ``--papers``, ``--seed`` and ``--first`` give the same file, byte for byte.
``--first N`` numbers the papers from N (a later part of a bigger corpus: its own file, drawn
from its own random stream, citing any paper numbered below it), so a ten-million-paper corpus
is written, imported and deleted part by part instead of held on disk whole.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass
class Pool:
    """The real text the generated papers are recombined from."""

    titles: list[list[str]] = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    authors: list[list[str]] = field(default_factory=list)
    venues: list[str] = field(default_factory=list)
    years: list[int] = field(default_factory=list)
    dois: list[str] = field(default_factory=list)
    with_abstract: float = 0.0


def read_pool(stores: list[Path]) -> Pool:
    """Titles, abstract sentences, author lists, venues and years of every paper in ``stores``
    (read in id order, so the pool, and hence the output, depends only on the stores)."""
    pool = Pool()
    n = with_abstract = 0
    for path in stores:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute("SELECT title, abstract, authors, venue, year, doi FROM papers ORDER BY id")
        for title, abstract, authors, venue, year, doi in rows:
            n += 1
            words = title.split()
            if len(words) >= 4:
                pool.titles.append(words)
            if abstract:
                with_abstract += 1
                pool.sentences.extend(s for s in _SENTENCE_END.split(abstract) if 30 <= len(s) <= 400)
            people = json.loads(authors)
            if people:
                pool.authors.append(people)
            if venue:
                pool.venues.append(venue)
            if year:
                pool.years.append(int(year))
            if doi:
                pool.dois.append(doi)
        conn.close()
    pool.with_abstract = with_abstract / max(1, n)
    return pool


# The ACL store's proportions (shared/data/citations/README.md): edges a paper, sentences an edge.
EDGES_PER_PAPER = 116_976 / 61_686
CONTEXT_SHARE = 14_987 / 116_976


def paper(i: int, rng: random.Random, pool: Pool, prefix: str = "gen") -> dict:
    """Generated paper number ``i``: see the module docstring for how each field is drawn."""
    a, b = rng.choice(pool.titles), rng.choice(pool.titles)
    title = " ".join(a[: len(a) // 2] + b[len(b) // 2 :])
    rec: dict = {
        "id": f"{prefix}{i}",
        "title": title,
        "authors": rng.choice(pool.authors) if pool.authors else [],
        "year": rng.choice(pool.years) if pool.years else 2020,
        "venue": rng.choice(pool.venues) if pool.venues else "",
        "doi": f"10.99999/{prefix}.{i}",
        "type": "inproceedings",
    }
    if rng.random() < pool.with_abstract:
        rec["abstract"] = " ".join(rng.choice(pool.sentences) for _ in range(rng.randint(3, 8)))
    # 0-3 generated papers and 0-1 real ones: 1.5 + 0.5 = 2.0 drawn, ~1.9 once duplicates go.
    refs = [f"{prefix}{rng.randrange(i)}" for _ in range(rng.randint(0, 3)) if i] + [
        rng.choice(pool.dois) for _ in range(rng.randint(0, 1)) if pool.dois
    ]
    if refs:
        out: list[str | dict] = []
        for ref in sorted(set(refs)):
            if pool.sentences and rng.random() < CONTEXT_SHARE:
                key = "doi" if ref.startswith("10.") else "id"
                out.append({key: ref, "contexts": [rng.choice(pool.sentences)]})
            else:
                out.append(ref)
        rec["references"] = out
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", action="append", required=True, help="a store to draw real text from (repeat)")
    ap.add_argument("--papers", type=int, required=True, help="how many papers to generate")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--id-prefix", default="gen", help="ids and DOIs of the papers (another set: another prefix)"
    )
    ap.add_argument("--first", type=int, default=0, help="number of the first paper (a later part)")
    ap.add_argument("--out", required=True, help="JSON Lines file to write")
    args = ap.parse_args()
    t0 = time.perf_counter()
    pool = read_pool([Path(s) for s in args.store])
    rng = random.Random(args.seed if not args.first else f"{args.seed}:{args.first}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    with tmp.open("w", encoding="utf-8") as f:
        for i in range(args.first, args.first + args.papers):
            f.write(json.dumps(paper(i, rng, pool, args.id_prefix), ensure_ascii=False) + "\n")
    tmp.replace(out)
    summary = {
        "papers": args.papers,
        "seed": args.seed,
        "first": args.first,
        "pool": {
            "titles": len(pool.titles),
            "sentences": len(pool.sentences),
            "with_abstract": pool.with_abstract,
        },
        "bytes": out.stat().st_size,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    json.dump(summary, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
