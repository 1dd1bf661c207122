"""ACM-CR evaluation: the sentence-level protocol of ``shared/data/README.md`` and standard metrics.

Queries: every ``<s cites=...>`` of a citing paper whose cited references include at least one DOI
of the collection. Local context: the sentence with citation markers removed; global context:
the citing paper's title and abstract. Collection: the store's ``inproceedings``/``article``
papers minus the blacklist (a paper must not be recommended to itself).
Metrics: R@K averaged over queries, MRR of the first relevant, nDCG@10 with binary gains.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from citewise.indexer.records import normalize_doi
from citewise.models.query import ContextQuery

CUTOFFS = (10, 50, 100, 200, 1000)
METRIC_KEYS = ("queries", "R@10", "R@50", "R@100", "R@200", "R@1000", "MRR", "nDCG@10")
# The own-library protocol (evaluation/library.py): a ~330-paper library, where the top counts.
LIBRARY_CUTOFFS = (1, 5, 10)
LIBRARY_KEYS = ("queries", "R@1", "R@5", "R@10", "MRR", "nDCG@10")

# Numeric markers: [13], [13, 14], [3-5], [3–5]; author-year markers: (Smith et al., 2019; Doe 2020a).
_NUMERIC_MARKER = re.compile(r"\s*\[\s*\d+(?:\s*[-–,;]\s*\d+)*\s*\]")
_AUTHOR_YEAR = re.compile(r"\s*\((?:[^()]*?(?:19|20)\d{2}[a-z]?)(?:[^()]*)\)")
_WS = re.compile(r"\s+")


def strip_citation_markers(sentence: str) -> str:
    """The sentence as local context: numeric and author-year citation markers removed."""
    text = _NUMERIC_MARKER.sub("", sentence)
    text = _AUTHOR_YEAR.sub("", text)
    return _WS.sub(" ", text).strip()


@dataclass
class EvalQuery:
    """One evaluation query: context plus the DOIs it should retrieve."""

    qid: str
    citing_doi: str
    query: ContextQuery
    relevant: set[str]  # normalised DOIs present in the collection
    sentence: str  # the original sentence, markers included


def _text(el: ET.Element | None) -> str:
    return _WS.sub(" ", "".join(el.itertext())).strip() if el is not None else ""


@dataclass
class CitingPaper:
    """One ACM-CR citing-paper XML as both protocols read it: its header, its references, and the
    sentences that cite (qids numbered over the sentences with a ``cites`` attribute)."""

    doi: str
    title: str
    abstract: str
    refs: dict[str, str]  # reference id -> normalised DOI
    sentences: list[tuple[str, str, list[str]]]  # (qid, sentence text, cited reference ids)


def read_citing_paper(path: Path) -> CitingPaper:
    root = ET.parse(path).getroot()
    citing = normalize_doi(_text(root.find("doi")))
    refs = {r.get("id", ""): normalize_doi(_text(r)) for r in root.iter("reference")}
    sentences: list[tuple[str, str, list[str]]] = []
    for ctx in root.iter("context"):
        for s in ctx.iter("s"):
            cites = s.get("cites")
            if cites:
                qid = f"{citing}#{ctx.get('id', '')}.{len(sentences) + 1}"
                sentences.append((qid, _text(s), [c.strip() for c in cites.split(",")]))
    return CitingPaper(citing, _text(root.find("title")), _text(root.find("abstract")), refs, sentences)


def load_citing_paper(path: Path, collection_dois: set[str] | None) -> list[EvalQuery]:
    """Queries of one citing paper XML (``collection_dois`` None keeps every cited DOI)."""
    paper = read_citing_paper(path)
    queries: list[EvalQuery] = []
    for qid, sentence, ids in paper.sentences:
        dois = {paper.refs.get(c, "") for c in ids}
        dois.discard("")
        if collection_dois is not None:
            dois &= collection_dois
        if dois:
            query = ContextQuery(strip_citation_markers(sentence), paper.title, paper.abstract)
            queries.append(EvalQuery(qid, paper.doi, query, dois, sentence))
    return queries


def load_dev_queries(
    papers_dir: str | Path,
    collection_dois: set[str] | None,
    load: Callable[[Path, set[str] | None], list[EvalQuery]] = load_citing_paper,
) -> list[EvalQuery]:
    """All queries of the citing-paper XML files under ``papers_dir`` (searched recursively), one
    paper at a time by ``load`` (the sentence protocol's, or the per-placeholder one's)."""
    out: list[EvalQuery] = []
    for f in sorted(Path(papers_dir).rglob("*.xml")):
        out.extend(load(f, collection_dois))
    return out


def load_blacklist(path: str | Path) -> set[str]:
    return {normalize_doi(x) for x in Path(path).read_text(encoding="utf-8").split() if x.strip()}


@dataclass
class Collection:
    """The evaluation collection inside a store: papers of type inproceedings/article, minus the
    blacklisted query papers (a paper must not be recommended to itself)."""

    doi_of: dict[int, str]  # every stored paper id -> DOI
    excluded: set[int]  # paper ids outside the collection
    dois: set[str]  # DOIs inside the collection


def acmcr_collection(store, blacklist: set[str]) -> Collection:
    """The ACM-CR protocol's collection over a store (``store`` is a citewise Store)."""
    rows = store.conn.execute("SELECT id, doi, entry_type FROM papers").fetchall()
    doi_of = {pid: doi for pid, doi, _ in rows}
    excluded = {pid for pid, doi, t in rows if doi in blacklist or t not in ("inproceedings", "article")}
    return Collection(doi_of, excluded, {doi for pid, doi, _ in rows if pid not in excluded and doi})


def query_metrics(
    ranked: Sequence[str], relevant: set[str], cutoffs: Sequence[int] = CUTOFFS
) -> dict[str, float]:
    """Metrics of one ranked list of DOIs against its relevant set (R@K at ``cutoffs``)."""
    out: dict[str, float] = {}
    hits = [i for i, d in enumerate(ranked[:1000]) if d in relevant]
    for k in cutoffs:
        out[f"R@{k}"] = sum(1 for i in hits if i < k) / len(relevant)
    out["MRR"] = 1.0 / (hits[0] + 1) if hits else 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i in hits if i < 10)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    out["nDCG@10"] = dcg / idcg if idcg else 0.0
    return out


def aggregate(per_query: list[dict[str, float]], keys: Sequence[str] = METRIC_KEYS) -> dict[str, float]:
    """Mean of each metric, plus the number of queries, in the documented key order."""
    n = len(per_query)
    out: dict[str, float] = {"queries": n}
    for key in keys[1:]:
        out[key] = round(sum(m[key] for m in per_query) / n, 4) if n else 0.0
    return out


def evaluate(
    rank: Callable[[EvalQuery], Sequence[str]],
    queries: list[EvalQuery],
    on_query: Callable[[], None] | None = None,
) -> dict[str, float]:
    """Run ``rank`` (query -> ranked DOIs, best first) over the queries and aggregate the metrics."""
    per_query = []
    for q in queries:
        per_query.append(query_metrics(rank(q), q.relevant))
        if on_query is not None:
            on_query()
    return aggregate(per_query)


def format_table(rows: dict[str, dict[str, float]], keys: Sequence[str] = METRIC_KEYS) -> str:
    """A markdown table of named metric rows (for the README and reports)."""
    head = "| run | " + " | ".join(keys[1:]) + " |"
    sep = "|---|" + "---|" * (len(keys) - 1)
    lines = [head, sep]
    for name, m in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{m[k]:.3f}" for k in keys[1:]) + " |")
    return "\n".join(lines)


# -- ACL citances (issue 16) ------------------------------------------------------------------
def load_acl_dev_queries(citances_path: str | Path, store) -> tuple[list[EvalQuery], dict[str, int]]:
    """The ACL dev split as queries: ScisummNet sentences of citing papers published in 2013 or 2014.

    Local context: the sentence with every author-year marker removed (narrative ``Brants (2000)``
    included); global context: the citing paper's title and abstract from the store. Relevant: the
    cited papers present in the store, as Anthology ids. Returns the queries and the store's paper
    id of each citing paper (excluded from its own ranking: a paper is not recommended to itself).
    """
    from .citances import load_citances, local_context

    rows = store.conn.execute("SELECT id, acl_id FROM papers WHERE acl_id != ''").fetchall()
    pid_of = {acl: pid for pid, acl in rows}
    queries: list[EvalQuery] = []
    citing_pid: dict[str, int] = {}
    for n, c in enumerate(load_citances(citances_path, dev=True), start=1):
        relevant = {x for x in c.cited if x in pid_of}
        local = local_context(c.text)
        if not relevant or not local:
            continue
        paper = store.get(pid_of[c.citing]) if c.citing in pid_of else None
        if paper is not None:
            citing_pid[c.citing] = paper.id
        q = ContextQuery(local, paper.title if paper else "", paper.abstract if paper else "")
        queries.append(EvalQuery(f"{c.citing}#{n}", c.citing, q, relevant, c.text))
    return queries, citing_pid


def acl_ids(store) -> dict[int, str]:
    """Every stored paper id -> its Anthology id ('' for papers from other sources)."""
    return dict(store.conn.execute("SELECT id, acl_id FROM papers").fetchall())
