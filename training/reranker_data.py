"""Training groups for the cross-encoder reranker: (query, 1 positive, N negatives).

Sources
- ScisummNet citing sentences (``citations/scisummnet-citances.jsonl``): the author-year marker of
  the cited paper becomes the placeholder ``[CIT]`` (or disappears: half the queries, because
  today's eval and editor queries carry no placeholder), other markers are removed; the global
  context is the citing paper's title and abstract from the ACL store. Positive: the cited
  paper's title + abstract (``scisummnet-cited-papers.jsonl``), title only half the time, since
  most cited papers have no abstract in a user's ACL store.
- Optional self-supervised ACM pairs: a sentence of a paper's abstract as the local context, the
  paper (title + the rest of its abstract) as the positive, so IR vocabulary is covered too.
Hard negatives come from the project's own BM25 prefetch over the store, plus one random paper.

Never training data: the ACL dev split (citing papers of 2013 and 2014) and anything of ACM-CR dev
(the blacklisted citing papers, and the papers their contexts cite are not used as positives).
"""

from __future__ import annotations

import html
import json
import random
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from citewise.evaluation.citances import acl_year, is_acl_dev, load_citances, local_context, read_jsonl
from citewise.indexer import citations
from citewise.models import citing_text
from citewise.models.query import ContextQuery
from citewise.models.reranker import PLACEHOLDER, candidate_text

# Sentence boundaries in an abstract, for the self-supervised ACM pairs.
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass
class Group:
    """One training group: the query, its positive candidate text and negative candidate texts."""

    local: str
    citing_title: str
    citing_abstract: str
    pos: str
    negs: list[str]
    source: str  # "acl" or "acm"
    citing: str  # citing paper id (Anthology id or DOI), for split checks
    positives: list[str] = field(default_factory=list)  # ids of the positive paper(s)
    # Which candidates read how they are cited: 0 the positive, i the i-th negative (issue 26).
    with_citing: list[int] = field(default_factory=list)

    def query(self) -> ContextQuery:
        return ContextQuery(self.local, self.citing_title, self.citing_abstract)


def _last_name(authors: list[str]) -> str:
    return authors[0].split(",")[0].strip() if authors else ""


def _hard_pool(rec, q: ContextQuery, excluded: set, depth: int) -> list[int]:
    """The BM25 top ``depth`` of the query, ``excluded`` left out: where hard negatives come from."""
    return [x.paper_id for x in rec.prefetcher(excluded, fast=True).candidates(q, depth, "bm25")]


def _negative_ids(
    hard: list[int], excluded: set, all_pids: list, rng, negatives: int, prefer: set | None = None
) -> list:
    """``negatives - 1`` papers of the ``hard`` pool plus random ones of ``all_pids`` to fill; with
    ``prefer``, hard ones of that set first (then the other hard ones)."""
    if prefer is None:
        picks = rng.sample(hard, min(negatives - 1, len(hard)))
    else:
        liked = [p for p in hard if p in prefer]
        picks = rng.sample(liked, min(negatives - 1, len(liked)))
        others = [p for p in hard if p not in prefer]
        picks += rng.sample(others, min(negatives - 1 - len(picks), len(others)))
    while len(picks) < negatives:
        r = rng.choice(all_pids)
        if r not in excluded and r not in picks:
            picks.append(r)
    return picks


def acl_groups(
    store,
    citances_path: str | Path,
    cited_papers_path: str | Path,
    *,
    negatives: int = 7,
    hard_depth: int = 30,
    limit: int | None = None,
    seed: int = 13,
    title_only_rate: float = 0.5,
    placeholder_rate: float = 0.5,
    citing_rate: float = 0.0,
) -> Iterator[Group]:
    """Training groups from the ScisummNet sentences (never the dev years), negatives from BM25.

    ``citing_rate``: the share of groups whose candidates read how they are cited, as the
    shipped reranker does where the store knows citers (``models/citing_text.py``; issue 26
    item 2): then the positive and every negative that other papers of the store cite get their
    citing sentence most like the query, never one of the query's own citing paper, and the hard
    negatives are drawn first among cited papers, so that within a group the citing text tells
    no candidate apart by its presence. The store must know no citer of the dev years
    (``bench/acl_expanded_store.py``), checked here."""
    src = _AclSource.open(store, cited_papers_path, seed, citing_rate)
    src.negatives, src.hard_depth = negatives, hard_depth
    src.title_only_rate, src.placeholder_rate = title_only_rate, placeholder_rate
    citances = load_citances(citances_path)
    src.rng.shuffle(citances)
    made = 0
    for c in citances:
        assert not is_acl_dev(c.citing), c.citing  # the split is the caller's guarantee too
        group = src.group_for(c)
        if group is None:
            continue
        yield group
        made += 1
        if limit is not None and made >= limit:
            return


@dataclass
class _AclSource:
    """What :func:`acl_groups` draws from: the store and its prefetch, the cited papers' own
    records, and the random stream (consumed in one fixed order, so a seed gives one file)."""

    store: Any
    rec: Any
    rng: random.Random
    cited_info: dict
    pid_of: dict[str, int]
    all_pids: list[int]
    cited_pids: list[int]  # papers other papers of the store cite (with citing_rate only)
    citing_rate: float
    negatives: int = 7
    hard_depth: int = 30
    title_only_rate: float = 0.5
    placeholder_rate: float = 0.5

    @classmethod
    def open(cls, store, cited_papers_path: str | Path, seed: int, citing_rate: float) -> _AclSource:
        from citewise.models.recommender import Recommender

        rows = store.conn.execute("SELECT id, acl_id FROM papers WHERE acl_id != ''").fetchall()
        rec = Recommender(store, use_dense=False, use_reranker=False)
        cited_pids: list[int] = []
        if citing_rate > 0:
            _refuse_dev_citers(store)
            cited_pids = [int(p) for p in rec.bm25.doc_ids[np.asarray(rec.bm25.citing_counts) > 0]]
        info = {r["id"]: r for r in read_jsonl(cited_papers_path)}
        pid_of = {acl: pid for pid, acl in rows}
        return cls(
            store, rec, random.Random(seed), info, pid_of, [p for p, _ in rows], cited_pids, citing_rate
        )

    def group_for(self, c) -> Group | None:
        """One citing sentence's group, or None (its cited paper unknown, or too little left)."""
        cited = next((x for x in c.cited if x in self.cited_info), None)
        if cited is None:
            return None
        q = self._query(c, cited)
        if q is None:
            return None
        info, rng, pid_of = self.cited_info[cited], self.rng, self.pid_of
        abstract = "" if rng.random() < self.title_only_rate else html.unescape(info.get("abstract", ""))
        excluded = {pid_of[x] for x in c.cited if x in pid_of} | (
            {pid_of[c.citing]} if c.citing in pid_of else set()
        )
        picks, said = self._negatives(q, c.citing, cited, excluded)
        pos = candidate_text(html.unescape(info["title"]), abstract, "", said.get(pid_of.get(cited, -1), ""))
        papers = self.store.get_many(picks)
        # Negatives lose their abstract as often as the positive does: otherwise "no abstract"
        # alone would tell the positive apart, and the model would learn length, not content.
        kept = [p for p in picks if p in papers]
        negs = [
            candidate_text(
                papers[p].title,
                "" if rng.random() < self.title_only_rate else papers[p].abstract,
                papers[p].keywords,
                said.get(p, ""),
            )
            for p in kept
        ]
        marks = ([0] if said else []) + [i for i, p in enumerate(kept, start=1) if said.get(p)]
        return Group(
            q.local, q.citing_title, q.citing_abstract, pos, negs, "acl", c.citing, list(c.cited), marks
        )

    def _query(self, c, cited: str) -> ContextQuery | None:
        """The sentence with the cited paper's marker masked (or gone), and the citing paper's title
        and abstract; None when under 20 characters are left."""
        store, pid_of = self.store, self.pid_of
        citing = store.get(pid_of[c.citing]) if c.citing in pid_of else None
        cited_paper = store.get(pid_of[cited]) if cited in pid_of else None
        last = _last_name(cited_paper.authors) if cited_paper else ""
        mark = PLACEHOLDER if self.rng.random() < self.placeholder_rate else ""
        local = local_context(c.text, last, acl_year(cited), mark)
        if len(local) < 20:
            return None
        return ContextQuery(local, citing.title if citing else "", citing.abstract if citing else "")

    def _negatives(
        self, q: ContextQuery, citing: str, cited: str, excluded: set
    ) -> tuple[list, dict[int, str]]:
        """The negatives' ids and, where this group reads citers, each candidate's citing sentence
        (paper id -> text; the positive's among them)."""
        rec, rng, pid_of = self.rec, self.rng, self.pid_of
        hard = _hard_pool(rec, q, excluded, self.hard_depth)
        said: dict[int, str] = {}
        if self.citing_rate > 0 and rng.random() < self.citing_rate and cited in pid_of:
            said = _citing_snippets(rec, q, citing, pid_of, set(hard) | excluded)
        if not said.get(pid_of.get(cited, -1)):  # an uncited positive: no candidate reads citers
            return _negative_ids(hard, excluded, self.all_pids, rng, self.negatives), {}
        # Negatives are drawn first among papers that other papers cite, the random one too.
        picks = _negative_ids(hard, excluded, self.cited_pids, rng, self.negatives, set(said))
        said |= _citing_snippets(rec, q, citing, pid_of, {p for p in picks if p not in said})
        return picks, said


def _citing_snippets(rec, q: ContextQuery, citing: str, pid_of: dict, pids: set) -> dict[int, str]:
    """Paper id -> the citing sentence most like the query, for those of ``pids`` that the store
    knows citers of, the query's own citing paper left out (its sentences would give the
    positive away)."""
    own = {citing} | ({f"#{pid_of[citing]}"} if citing in pid_of else set())
    found = citations.expansions(rec.store, pids, without_citing=own)
    texts = {pid: exp.texts for pid, exp in found.items() if exp.texts}
    return citing_text.snippets(q.local, texts, rec.bm25.tokenizer, rec.bm25.idf_of)


def _refuse_dev_citers(store) -> None:
    """Stop unless the store's citation edges leave out every citing paper of the dev years: their
    sentences would reach training as the candidates' citing text."""
    if not citations.has_edges(store):
        raise SystemExit(f"{store.path}: no citation edges; build it with bench/acl_expanded_store.py")
    rows = store.conn.execute("SELECT DISTINCT citing_ref FROM citation_edges").fetchall()
    dev = [ref for (ref,) in rows if is_acl_dev(ref)]
    if dev:
        raise SystemExit(
            f"{store.path}: {len(dev)} citing papers of the ACL dev years in its citation edges "
            f"(e.g. {dev[0]}); build the store with bench/acl_expanded_store.py"
        )


def acm_dev_dois(papers_dir: str | Path) -> set[str]:
    """DOIs the ACM-CR dev set touches: its citing papers and every reference they list."""
    from citewise.evaluation.protocol import load_dev_queries

    out: set[str] = set()
    for q in load_dev_queries(papers_dir, None):
        out.add(q.citing_doi)
        out |= q.relevant
    return out


def acm_groups(
    store,
    blacklist: set[str],
    dev_dois: set[str],
    *,
    negatives: int = 7,
    hard_depth: int = 30,
    limit: int = 3000,
    seed: int = 17,
) -> Iterator[Group]:
    """Self-supervised pairs: an abstract sentence (not the first) as the local context, the paper
    (title + the rest of its abstract) as the positive; no global context."""
    from citewise.models.recommender import Recommender

    rng = random.Random(seed)
    rows = store.conn.execute("SELECT id, doi FROM papers WHERE length(abstract) > 400").fetchall()
    banned = blacklist | dev_dois
    rows = [(pid, doi) for pid, doi in rows if doi not in banned]
    rng.shuffle(rows)
    all_pids = [pid for pid, _ in rows]
    rec = Recommender(store, use_dense=False, use_reranker=False)
    made = 0
    for pid, doi in rows:
        p = store.get(pid)
        sents = [s for s in _SENT.split(p.abstract) if 60 <= len(s) <= 300]
        if len(sents) < 3:
            continue
        i = rng.randrange(1, len(sents))
        local = sents[i] if rng.random() < 0.5 else sents[i].rstrip(". ") + f" {PLACEHOLDER}."
        rest = " ".join(s for j, s in enumerate(sents) if j != i)
        q = ContextQuery(local)
        picks = _negative_ids(_hard_pool(rec, q, {pid}, hard_depth), {pid}, all_pids, rng, negatives)
        papers = store.get_many(picks)
        negs = [
            candidate_text(papers[x].title, papers[x].abstract, papers[x].keywords)
            for x in picks
            if x in papers
        ]
        yield Group(local, "", "", candidate_text(p.title, rest, p.keywords), negs, "acm", doi, [doi])
        made += 1
        if made >= limit:
            return


def write_groups(groups: Iterator[Group], path: str | Path) -> int:
    """Write groups as JSON Lines (flushed each line, so training can start on a growing file)."""
    n = 0
    with open(path, "a", encoding="utf-8") as fh:
        for g in groups:
            fh.write(json.dumps(asdict(g), ensure_ascii=False) + "\n")
            fh.flush()
            n += 1
    return n


def citing_shares(groups: list[Group]) -> dict[str, float]:
    """How often positives and negatives read how they are cited: equal shares mean the presence
    of citing text does not tell the positive apart across the training set."""
    acl = [g for g in groups if g.source == "acl"]
    negs = sum(len(g.negs) for g in acl)
    return {
        "groups": len(acl),
        "positives_with_citing": round(sum(0 in g.with_citing for g in acl) / max(1, len(acl)), 3),
        "negatives_with_citing": round(
            sum(len(g.with_citing) - (0 in g.with_citing) for g in acl) / max(1, negs), 3
        ),
    }


def read_groups(path: str | Path) -> list[Group]:
    return [Group(**row) for row in read_jsonl(path)]


def _arguments(argv: list[str] | None):
    import argparse

    from training.paths import SHARED_DATA as data

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--acl-store", required=True)
    ap.add_argument("--acm-store")
    ap.add_argument("--data", default=str(data), help="shared data folder (citations/, acm-cr/)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--negatives", type=int, default=7)
    ap.add_argument("--acl-limit", type=int)
    ap.add_argument("--acm-limit", type=int, default=3000)
    ap.add_argument(
        "--citing-rate",
        type=float,
        default=0.0,
        help="share of ACL groups whose candidates read their citing sentence (needs a store made "
        "by bench/acl_expanded_store.py)",
    )
    ap.add_argument(
        "--only", choices=("acl", "acm"), help="build one source only (two processes in parallel)"
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``python -m training.reranker_data``: build the training file."""
    import sys

    from citewise.evaluation.protocol import load_blacklist
    from citewise.indexer.store import Store

    a = _arguments(argv)
    d = Path(a.data)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    n = 0
    if a.acm_store and a.acm_limit and a.only != "acl":
        # Interleave: ACM groups first in a small block, then ACL; the trainer shuffles anyway.
        acm = Store(a.acm_store, create=False)
        blacklist, dev = load_blacklist(d / "acm-cr" / "blacklist.txt"), acm_dev_dois(d / "acm-cr" / "dev")
        n += write_groups(acm_groups(acm, blacklist, dev, negatives=a.negatives, limit=a.acm_limit), out)
        print(f"{n} ACM groups", file=sys.stderr)
    if a.only == "acm":
        return 0
    acl = Store(a.acl_store, create=False)
    n += write_groups(
        acl_groups(
            acl,
            d / "citations" / "scisummnet-citances.jsonl",
            d / "citations" / "scisummnet-cited-papers.jsonl",
            negatives=a.negatives,
            limit=a.acl_limit,
            citing_rate=a.citing_rate,
        ),
        out,
    )
    print(f"{n} groups in all -> {out}", file=sys.stderr)
    if a.citing_rate > 0:
        print(json.dumps(citing_shares(read_groups(out))), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
