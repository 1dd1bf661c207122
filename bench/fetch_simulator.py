"""A simulated Semantic Scholar Graph API and OpenAlex over the real ACL citation graph, on loopback.

Why: ``citewise fetch`` must be measured at scale (coverage of a draft's references, requests,
time at the public rate limits) and under faults (429 with Retry-After, 500s, timeouts, truncated
bodies, an expiring cursor, a paper that 404s) without touching the network. The recorded real
responses in ``../shared/data/samples/api`` fix the shapes; this server answers in those shapes
from a real graph: the ACL Anthology XML (61k papers with titles, abstracts, years, DOIs), the
ACL citation edges and the ScisummNet citing sentences (served as S2 ``contexts``).

The honest split (``hide_dev``, on by default): no paper of the ACL dev years (2013, 2014) is
served, so neither are the dev papers themselves, their edges, nor the citing sentences they wrote
(the dev queries): an API could not know a draft not yet published. Intents are not in the data:
an edge with sentences gets one intent drawn from a hash of the pair (stable, synthetic), and is
influential when it has two sentences or more.

Faults are seeded and keyed by (request, how many times that same request came before), so the
same client run meets the same faults whatever the timing; only the rate limiter depends on time.

    python bench/fetch_simulator.py --port 0 --print-url --s2-rate 1 --error-rate 0.05
    with Simulator(SimConfig(s2_rate=1)) as sim: ...   # sim.url, sim.env(), sim.stats()

Endpoints: S2 ``POST /graph/v1/paper/batch``, ``GET /graph/v1/paper/{id}`` (+ ``/references``,
``/citations``), ``/graph/v1/paper/search/match``, ``/search``, ``/search/bulk`` (``/graph/v1``
optional); OpenAlex ``GET /works`` (filters ``doi``, ``openalex``, ``cites``, ``cited_by``,
``publication_year``, ``title.search``...; cursor or page paging; ``select``) and
``/works/{id}``; ``/sources``, ``/fields``, ``/subfields``, ``/topics`` with ``search=`` (what
``fetch --venue`` / ``--field`` resolve names against); ``/crossref/...`` and ``/arxiv/...`` answer "not found" so nothing leaves the
machine; ``GET /_sim/stats`` and ``POST /_sim/reset`` for the counters.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import os
import pickle
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import astuple, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from citewise.evaluation.citances import DEV_YEARS, acl_year
from citewise.indexer.acl_xml import iter_acl_xml
from citewise.indexer.citations import read_edges
from citewise.indexer.jsonl import iter_jsonl
from citewise.indexer.records import PaperRecord

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("CITEWISE_SHARED_DATA", REPO.parent / "shared" / "data"))
CACHE_DIR = Path(os.environ.get("CITEWISE_SIM_CACHE", "/tmp/citewise-fetch-sim"))
GRAPH_FORMAT = 2  # bump when Graph changes, so old caches are rebuilt
LOOPBACK = ("127.0.0.1", "::1", "localhost")
S2_PUBLIC_RATE = 1.0  # requests per second, the public pool without a key
INTENTS = ("background", "methodology", "result")
FIXED_DATE = "2025-01-01T00:00:00"


# -- the graph --------------------------------------------------------------------------------------
@dataclass(slots=True)
class Paper:
    """What the APIs know of one Anthology paper (authors as "First Last", as both APIs write them)."""

    acl_id: str
    title: str
    abstract: str
    year: int | None
    doi: str
    authors: tuple[str, ...]
    venue: str
    journal: bool


@dataclass
class Graph:
    """The whole ACL graph, before any honest-split filtering; pickled once under /tmp."""

    papers: dict[str, Paper]
    refs: dict[str, list[str]]  # citing -> cited, file order, without duplicates
    contexts: dict[tuple[str, str], list[str]]  # (citing, cited) -> citing sentences


def _first_last(name: str) -> str:
    last, sep, first = name.partition(", ")
    return f"{first} {last}" if sep else name


def _read_papers(data: Path) -> dict[str, Paper]:
    """Every Anthology paper with a title, through the project's own XML reader; abstracts the XML
    lacks come from the ScisummNet cited papers (read by the JSON Lines importer)."""
    papers: dict[str, Paper] = {}
    for xml in sorted((data / "acl-anthology" / "xml").glob("*.xml")):
        for rec in iter_acl_xml(str(xml)):
            if isinstance(rec, PaperRecord) and rec.acl_id and rec.title:
                papers[rec.acl_id] = Paper(
                    rec.acl_id,
                    rec.title,
                    rec.abstract,
                    rec.year,
                    rec.doi,
                    tuple(_first_last(a) for a in rec.authors),
                    rec.venue,
                    rec.entry_type == "article",
                )
    cited = data / "citations" / "scisummnet-cited-papers.jsonl"
    for rec in iter_jsonl(str(cited)) if cited.exists() else ():
        paper = papers.get(rec.key) if isinstance(rec, PaperRecord) else None
        if paper is not None and not paper.abstract and rec.abstract:
            paper.abstract = rec.abstract
    return papers


def _read_edges(data: Path) -> tuple[dict[str, list[str]], dict[tuple[str, str], list[str]]]:
    """The union of the edge file and the citing sentences, through the project's citation reader."""
    refs: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()
    contexts: dict[tuple[str, str], list[str]] = {}
    folder = data / "citations"
    for path in (folder / "acl-citation-edges.tsv", folder / "scisummnet-citances.jsonl"):
        for edge in read_edges(path):
            pair = (edge.citing, edge.cited)
            if edge.citing == edge.cited:
                continue
            if pair not in seen:
                seen.add(pair)
                refs.setdefault(edge.citing, []).append(edge.cited)
            if edge.context and edge.context not in contexts.get(pair, ()):
                contexts.setdefault(pair, []).append(edge.context)
    return refs, contexts


def _cache_path(data: Path) -> Path:
    """A cache file named by what it was built from (paths, sizes, mtimes), so edits rebuild it."""
    h = hashlib.sha256(f"{GRAPH_FORMAT}:{data.resolve()}".encode())
    files = sorted((data / "acl-anthology" / "xml").glob("*.xml")) + sorted((data / "citations").glob("*"))
    for path in files:
        st = path.stat()
        h.update(f"{path.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return CACHE_DIR / f"acl-graph-{h.hexdigest()[:16]}.pickle"


def load_graph(data: Path = DATA) -> Graph:
    """The ACL graph, parsed once (a minute or two) and then read from its pickle (a second)."""
    cache = _cache_path(data)
    if cache.exists():  # plain tuples and dicts: readable whichever module name loaded this file
        with open(cache, "rb") as fh:
            rows, refs, contexts = pickle.load(fh)
        return Graph({row[0]: Paper(*row) for row in rows}, refs, contexts)
    refs, contexts = _read_edges(data)
    graph = Graph(_read_papers(data), refs, contexts)
    rows = [astuple(p) for p in graph.papers.values()]
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        pickle.dump((rows, refs, contexts), fh, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, cache)
    return graph


def is_dev_paper(paper: Paper) -> bool:
    """A paper of the ACL dev years, by its Anthology id or its volume's year."""
    return acl_year(paper.acl_id) in DEV_YEARS or paper.year in DEV_YEARS


def norm_title(text: str) -> str:
    """Lower-case words and digits only: how a title match forgives punctuation and case."""
    return " ".join(re.findall(r"[0-9a-z]+", text.lower()))


def chance(seed: int, *parts: object) -> float:
    """A number in [0, 1) fixed by the seed and ``parts``: the simulator's only randomness."""
    digest = hashlib.blake2b(repr((seed, *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


# -- the configuration and what the API shows ----------------------------------------------------
@dataclass
class SimConfig:
    """What the simulated APIs hide, how fast they answer and which faults they inject (rates in 0..1)."""

    data: Path = DATA
    hide_dev: bool = True
    seed: int = 0
    s2_rate: float = 0.0  # requests per second per API; 0 = unlimited
    openalex_rate: float = 0.0
    burst: int = 1
    jitter_seconds: float = 0.05  # how early a request may arrive and still pass the limiter
    retry_after: bool = True  # real S2 sends none with its 429; the issue asks for it
    error_rate: float = 0.0  # 500
    slow_rate: float = 0.0  # answer after slow_seconds (a client timeout)
    slow_seconds: float = 30.0
    truncate_rate: float = 0.0  # full Content-Length, half the body, connection closed
    cursor_expire_rate: float = 0.0  # a cursor's first use answers "expired"
    cursor_ttl_requests: int = 0  # a cursor expires once this many requests came after it; 0 = never
    missing: frozenset[str] = frozenset()  # Anthology ids that lookups answer 404 / null for
    missing_rate: float = 0.0


class View:
    """The graph as the API shows it: dev-year papers hidden (``hide_dev``) with every edge and
    sentence touching them, ids of each API's spelling, and the lookup tables."""

    def __init__(self, graph: Graph, cfg: SimConfig) -> None:
        self.graph, self.cfg = graph, cfg
        order = sorted(graph.papers)
        self.order = order
        self.index = {acl: i for i, acl in enumerate(order)}
        self.visible = {a for a in order if not (cfg.hide_dev and is_dev_paper(graph.papers[a]))}
        self.missing = {
            a for a in self.visible if a in cfg.missing or chance(cfg.seed, "missing", a) < cfg.missing_rate
        }
        self.refs: dict[str, list[str]] = {}
        self.cites: dict[str, list[str]] = {}
        for citing in sorted(graph.refs):
            if citing not in self.visible:
                continue
            for cited in graph.refs[citing]:
                if cited in self.visible:
                    self.refs.setdefault(citing, []).append(cited)
                    self.cites.setdefault(cited, []).append(citing)
        self._build_lookups(order)
        self._search_text: dict[str, str] | None = None

    def _build_lookups(self, order: list[str]) -> None:
        self.by_pid: dict[str, str] = {}
        self.by_doi: dict[str, str] = {}
        self.by_title: dict[str, str] = {}
        self.by_acl_lower = {a.lower(): a for a in self.visible}
        for acl in order:
            if acl not in self.visible:
                continue
            paper = self.graph.papers[acl]
            self.by_pid[self.paper_id(acl)] = acl
            if paper.doi:
                self.by_doi.setdefault(paper.doi.lower(), acl)
            self.by_title.setdefault(norm_title(paper.title), acl)

    # ids
    def paper_id(self, acl: str) -> str:
        """S2's 40-hex paperId."""
        return hashlib.sha1(f"acl:{acl}".encode()).hexdigest()

    def corpus_id(self, acl: str) -> int:
        return 1_000_000 + self.index[acl]

    def work_id(self, acl: str) -> str:
        return f"W{4_000_000_000 + self.index[acl]}"

    def from_corpus(self, value: str) -> str | None:
        n = int(value) - 1_000_000 if value.strip().isdigit() else -1
        return self._at(n)

    def from_work(self, value: str) -> str | None:
        m = re.fullmatch(r"(?:https://openalex\.org/)?[Ww](\d+)", value.strip())
        return self._at(int(m.group(1)) - 4_000_000_000) if m else None

    def _at(self, n: int) -> str | None:
        if not 0 <= n < len(self.order):
            return None
        acl = self.order[n]
        return acl if acl in self.visible else None

    def lookup(self, acl: str | None) -> str | None:
        """A visible paper that lookups may answer (not one of the papers chosen to 404)."""
        return acl if acl is not None and acl in self.visible and acl not in self.missing else None

    def search_text(self) -> dict[str, str]:
        """Normalised title + abstract of every visible paper, built on the first search only."""
        if self._search_text is None:
            self._search_text = {
                a: f" {norm_title(self.graph.papers[a].title + ' ' + self.graph.papers[a].abstract)} "
                for a in sorted(self.visible)
            }
        return self._search_text

    def matches(self, query: str) -> list[str]:
        """Visible papers whose title and abstract hold every word of ``query``, in id order."""
        words = norm_title(query).split()
        if not words:
            return []
        return [a for a, text in self.search_text().items() if all(f" {w} " in text for w in words)]


# -- replies ---------------------------------------------------------------------------------------
@dataclass
class Reply:
    """One HTTP answer."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def json_reply(obj: object, status: int = 200) -> Reply:
    return Reply(status, json.dumps(obj, ensure_ascii=False).encode("utf-8"))


def s2_error(status: int, message: str) -> Reply:
    """S2's error bodies: ``{"error": ...}`` for 4xx, ``{"message": ...}`` for 5xx and 429."""
    key = "error" if 400 <= status < 500 and status != 429 else "message"
    return json_reply({key: message}, status)


OPENALEX_404 = (
    b"<!doctype html>\n<html lang=en>\n<title>404 Not Found</title>\n<h1>Not Found</h1>\n<p>The requested "
    b"URL was not found on the server. If you entered the URL manually please check your spelling and "
    b"try again.</p>\n"
)


def openalex_error(message: str, status: int = 400) -> Reply:
    return json_reply({"error": "Invalid query parameters error.", "message": message}, status)


# -- Semantic Scholar ------------------------------------------------------------------------------
S2_PAPER_FIELDS = (
    "paperId corpusId externalIds url title abstract venue publicationVenue year referenceCount "
    "citationCount influentialCitationCount isOpenAccess openAccessPdf fieldsOfStudy s2FieldsOfStudy "
    "publicationTypes publicationDate journal citationStyles authors tldr"
).split()
S2_EDGE_FIELDS = ("contexts", "intents", "contextsWithIntent", "isInfluential")


def _s2_value(view: View, acl: str, name: str) -> object:
    """One field of an S2 paper object (the fields the data cannot know are the API's empty values)."""
    p = view.graph.papers[acl]
    pid = view.paper_id(acl)
    external = {"ACL": acl, **({"DOI": p.doi} if p.doi else {}), "CorpusId": view.corpus_id(acl)}
    pdf = f"https://aclanthology.org/{acl}.pdf"
    values: dict[str, Callable[[], object]] = {
        "paperId": lambda: pid,
        "corpusId": lambda: view.corpus_id(acl),
        "externalIds": lambda: external,
        "url": lambda: f"https://www.semanticscholar.org/paper/{pid}",
        "title": lambda: p.title,
        "abstract": lambda: p.abstract or None,
        "venue": lambda: p.venue,
        "publicationVenue": lambda: None,
        "year": lambda: p.year,
        "referenceCount": lambda: len(view.refs.get(acl, ())),
        "citationCount": lambda: len(view.cites.get(acl, ())),
        "influentialCitationCount": lambda: sum(_influential(view, c, acl) for c in view.cites.get(acl, ())),
        "isOpenAccess": lambda: True,
        "openAccessPdf": lambda: {"url": pdf, "status": "GREEN", "license": "CCBY"},
        "fieldsOfStudy": lambda: ["Computer Science"],
        "s2FieldsOfStudy": lambda: [{"category": "Computer Science", "source": "external"}],
        "publicationTypes": lambda: ["JournalArticle"] if p.journal else ["Conference"],
        "publicationDate": lambda: None,
        "journal": lambda: {"name": p.venue},
        "citationStyles": lambda: {"bibtex": f"@inproceedings{{{acl},\n title = {{{p.title}}}\n}}\n"},
        "authors": lambda: [{"authorId": _author_id(a), "name": a} for a in p.authors],
        "tldr": lambda: None,
    }
    return values[name]()


def _author_id(name: str) -> str:
    return str(int(hashlib.sha1(name.encode()).hexdigest()[:8], 16))


def _influential(view: View, citing: str, cited: str) -> bool:
    return len(view.graph.contexts.get((citing, cited), ())) >= 2


def s2_paper(view: View, acl: str, fields: list[str]) -> dict:
    """An S2 paper object: paperId first, then the asked fields (nested references/citations too)."""
    out: dict[str, object] = {"paperId": view.paper_id(acl)}
    for name in fields:
        base, _, sub = name.partition(".")
        if base in ("references", "citations"):
            others = view.refs.get(acl, []) if base == "references" else view.cites.get(acl, [])
            out[base] = [s2_paper(view, o, [sub] if sub else ["title"]) for o in others]
        elif name != "paperId":
            out[name] = _s2_value(view, acl, name)
    return out


def s2_edge(view: View, citing: str, cited: str, side: str, fields: list[str]) -> dict:
    """One edge object of ``/references`` (side ``citedPaper``) or ``/citations`` (``citingPaper``)."""
    contexts = view.graph.contexts.get((citing, cited), [])
    intents = [INTENTS[int(chance(0, "intent", citing, cited) * len(INTENTS))]] if contexts else []
    values = {
        "contexts": contexts,
        "intents": intents,
        "contextsWithIntent": [{"context": c, "intents": intents} for c in contexts],
        "isInfluential": len(contexts) >= 2,
    }
    out: dict[str, object] = {name: values[name] for name in fields if name in values}
    paper_fields = [f for f in fields if f not in values]
    other = cited if side == "citedPaper" else citing
    out[side] = s2_paper(view, other, paper_fields)
    return out


def s2_fields(query: dict[str, list[str]], edges: bool) -> list[str] | Reply:
    """The asked fields, or S2's 400 naming the unknown ones."""
    raw = query.get("fields", [""])[0]
    names = [f.strip() for f in raw.split(",") if f.strip()] or ["title"]
    allowed = set(S2_PAPER_FIELDS) | (set(S2_EDGE_FIELDS) if edges else set())
    bad = [n for n in names if n not in allowed and not _nested_ok(n, edges)]
    if bad:
        return s2_error(400, f"Unrecognized or unsupported fields: [{', '.join(bad)}]")
    return names


def _nested_ok(name: str, edges: bool) -> bool:
    base, _, sub = name.partition(".")
    return not edges and base in ("references", "citations") and (not sub or sub in S2_PAPER_FIELDS)


def s2_resolve(view: View, raw: str) -> str | None:
    """The Anthology id behind an S2 paper id: ``DOI:``, a bare DOI, ``ACL:``, ``CorpusId:``, a
    40-hex paperId; others (``ARXIV:``, ``MAG:``, ``URL:``...) are unknown to the ACL graph."""
    raw = unquote(raw).strip()
    prefix, sep, value = raw.partition(":")
    kind = prefix.lower() if sep else ""
    if kind == "doi" or (not kind and raw.startswith("10.")):
        acl = view.by_doi.get((value if kind else raw).lower())
    elif kind == "acl":
        acl = view.by_acl_lower.get(value.lower())
    elif kind == "corpusid":
        acl = view.from_corpus(value)
    elif not kind and re.fullmatch(r"[0-9a-f]{40}", raw):
        acl = view.by_pid.get(raw)
    else:
        acl = None
    return view.lookup(acl)


def _int_param(query: dict[str, list[str]], name: str, default: int) -> int | None:
    raw = query.get(name, [str(default)])[0]
    return int(raw) if raw.strip().isdigit() else None


def s2_list(view: View, acl: str, kind: str, query: dict[str, list[str]]) -> Reply:
    """``/references`` or ``/citations`` of one paper: offset/limit paging, ``next`` while more."""
    fields = s2_fields(query, edges=True)
    if isinstance(fields, Reply):
        return fields
    offset, limit = _int_param(query, "offset", 0), _int_param(query, "limit", 100)
    if offset is None or limit is None or not 1 <= limit <= 1000 or offset + limit > 10_000:
        return s2_error(400, "Requested data for this limit and/or offset is not available")
    if kind == "references":
        pairs = [(acl, cited) for cited in view.refs.get(acl, [])]
        side = "citedPaper"
    else:
        pairs = [(citing, acl) for citing in view.cites.get(acl, [])]
        side = "citingPaper"
    page = [s2_edge(view, a, b, side, fields) for a, b in pairs[offset : offset + limit]]
    body: dict[str, object] = {"offset": offset}
    if offset + limit < len(pairs):
        body["next"] = offset + limit
    body["data"] = page
    return json_reply(body)


def s2_batch(view: View, query: dict[str, list[str]], body: bytes) -> Reply:
    """``POST /paper/batch``: one entry per asked id, ``null`` for the unknown, at most 500."""
    fields = s2_fields(query, edges=False)
    if isinstance(fields, Reply):
        return fields
    try:
        ids = json.loads(body or b"{}").get("ids")
    except (ValueError, AttributeError):
        ids = None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return s2_error(400, 'Body must be a JSON object {"ids": [...]} of paper ids')
    if len(ids) > 500:
        return s2_error(400, "Cannot process more than 500 ids at once")
    found = [s2_resolve(view, i) for i in ids]
    return json_reply([s2_paper(view, a, fields) if a else None for a in found])


def s2_match(view: View, query: dict[str, list[str]]) -> Reply:
    """``/paper/search/match``: the one paper whose title matches, or S2's 404."""
    fields = s2_fields(query, edges=False)
    if isinstance(fields, Reply):
        return fields
    acl = view.lookup(view.by_title.get(norm_title(query.get("query", [""])[0])))
    if acl is None:
        return s2_error(404, "Title match not found")
    return json_reply({"data": [{**s2_paper(view, acl, fields), "matchScore": 200.0}]})


def s2_search(view: View, query: dict[str, list[str]], bulk: bool) -> Reply:
    """``/paper/search`` (offset paging, 1,000 at most) and ``/paper/search/bulk`` (token paging, 1,000
    a page): every word of the query in the title or abstract, with an optional ``year`` range."""
    fields = s2_fields(query, edges=False)
    if isinstance(fields, Reply):
        return fields
    hits = [a for a in view.matches(query.get("query", [""])[0]) if a not in view.missing]
    lo, hi = _year_range(query.get("year", [""])[0])
    hits = [a for a in hits if lo <= (view.graph.papers[a].year or 0) <= hi]
    if bulk:
        token = query.get("token", [""])[0]
        offset = int(token) if token.isdigit() else 0
        page = hits[offset : offset + 1000]
        more = offset + 1000 < len(hits)
        data = [s2_paper(view, a, fields) for a in page]
        return json_reply({"total": len(hits), "token": str(offset + 1000) if more else None, "data": data})
    offset, limit = _int_param(query, "offset", 0), _int_param(query, "limit", 10)
    if offset is None or limit is None or not 1 <= limit <= 100 or offset + limit > 1000:
        return s2_error(400, "Requested data for this limit and/or offset is not available")
    body: dict[str, object] = {"total": len(hits), "offset": offset}
    if offset + limit < len(hits):
        body["next"] = offset + limit
    body["data"] = [s2_paper(view, a, fields) for a in hits[offset : offset + limit]]
    return json_reply(body)


def _year_range(raw: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d{4})?\s*(-)?\s*(\d{4})?\s*", raw or "")
    if not raw or not m or not (m.group(1) or m.group(3)):
        return 0, 9999
    lo = int(m.group(1)) if m.group(1) else 0
    hi = int(m.group(3)) if m.group(3) else (9999 if m.group(2) else lo)
    return lo, hi


def route_s2(view: View, method: str, path: str, query: dict[str, list[str]], body: bytes) -> Reply:
    """Dispatch one Semantic Scholar Graph API request (``/graph/v1`` prefix optional)."""
    rest = path.removeprefix("/graph/v1")
    if rest == "/paper/batch":
        return s2_batch(view, query, body) if method == "POST" else s2_error(405, "Use POST")
    if rest == "/paper/search/match":
        return s2_match(view, query)
    if rest in ("/paper/search", "/paper/search/bulk"):
        return s2_search(view, query, bulk=rest.endswith("bulk"))
    m = re.fullmatch(r"/paper/(.+?)(/references|/citations)?", rest)
    if m is None:
        return s2_error(404, f"Unknown path {path}")
    acl = s2_resolve(view, m.group(1))
    if acl is None:
        return s2_error(404, f"Paper with id {unquote(m.group(1))} not found")
    if m.group(2):
        return s2_list(view, acl, m.group(2)[1:], query)
    fields = s2_fields(query, edges=False)
    return fields if isinstance(fields, Reply) else json_reply(s2_paper(view, acl, fields))


# -- OpenAlex ----------------------------------------------------------------------------------------
WORK_KEYS = (
    "id doi title display_name publication_year publication_date ids language primary_location type "
    "type_crossref indexed_in open_access authorships institution_assertions countries_distinct_count "
    "institutions_distinct_count corresponding_author_ids corresponding_institution_ids apc_list apc_paid "
    "fwci has_fulltext fulltext_origin cited_by_count citation_normalized_percentile "
    "cited_by_percentile_year biblio is_retracted is_paratext primary_topic topics keywords concepts mesh "
    "locations_count locations best_oa_location sustainable_development_goals grants datasets versions "
    "referenced_works_count referenced_works related_works abstract_inverted_index cited_by_api_url "
    "counts_by_year updated_date created_date"
).split()
_EMPTY_LISTS = (
    "institution_assertions corresponding_author_ids corresponding_institution_ids topics keywords "
    "concepts mesh sustainable_development_goals grants datasets versions related_works counts_by_year"
).split()


def inverted_index(text: str) -> dict[str, list[int]] | None:
    """OpenAlex's ``abstract_inverted_index``: each whitespace token -> its positions."""
    out: dict[str, list[int]] = {}
    for i, token in enumerate(text.split()):
        out.setdefault(token, []).append(i)
    return out or None


def _location(acl: str, p: Paper) -> dict:
    return {
        "is_oa": True,
        "landing_page_url": f"https://aclanthology.org/{acl}",
        "pdf_url": f"https://aclanthology.org/{acl}.pdf",
        "source": {
            "id": f"https://openalex.org/{source_id(p.venue)}",
            "display_name": p.venue,
            "type": "conference",
        },
        "license": "cc-by",
        "license_id": "https://openalex.org/licenses/cc-by",
        "version": "publishedVersion",
        "is_accepted": True,
        "is_published": True,
    }


def openalex_work(view: View, acl: str) -> dict:
    """A whole OpenAlex work (every key of a recorded real one; what the data lacks is empty)."""
    p = view.graph.papers[acl]
    wid = f"https://openalex.org/{view.work_id(acl)}"
    doi = f"https://doi.org/{p.doi.lower()}" if p.doi else None
    refs = [f"https://openalex.org/{view.work_id(r)}" for r in view.refs.get(acl, [])]
    where = _location(acl, p)
    work: dict[str, object] = dict.fromkeys(WORK_KEYS)
    work.update({k: [] for k in _EMPTY_LISTS})
    work.update(
        id=wid,
        doi=doi,
        title=p.title,
        display_name=p.title,
        publication_year=p.year,
        publication_date=f"{p.year}-01-01" if p.year else None,
        ids={"openalex": wid, **({"doi": doi} if doi else {})},
        language="en",
        primary_location=where,
        type="article",
        type_crossref="journal-article" if p.journal else "proceedings-article",
        indexed_in=["crossref"] if doi else [],
        open_access={
            "is_oa": True,
            "oa_status": "green",
            "oa_url": where["pdf_url"],
            "any_repository_has_fulltext": True,
        },
        authorships=[_authorship(i, a) for i, a in enumerate(p.authors)],
        countries_distinct_count=0,
        institutions_distinct_count=0,
        has_fulltext=False,
        cited_by_count=len(view.cites.get(acl, ())),
        biblio={"volume": None, "issue": None, "first_page": None, "last_page": None},
        is_retracted=False,
        is_paratext=False,
        locations_count=1,
        locations=[where],
        best_oa_location=where,
        referenced_works_count=len(refs),
        referenced_works=refs,
        abstract_inverted_index=inverted_index(p.abstract),
        primary_topic=topic_of(view, acl),
        topics=[topic_of(view, acl)],
        cited_by_api_url=f"https://api.openalex.org/works?filter=cites:{view.work_id(acl)}",
        updated_date=FIXED_DATE,
        created_date=FIXED_DATE[:10],
    )
    return work


def _authorship(i: int, name: str) -> dict:
    return {
        "author_position": "first" if i == 0 else "middle",
        "author": {
            "id": f"https://openalex.org/A{5_000_000_000 + int(_author_id(name)) % 10**9}",
            "display_name": name,
            "orcid": None,
        },
        "institutions": [],
        "countries": [],
        "is_corresponding": False,
        "raw_author_name": name,
        "raw_affiliation_strings": [],
        "affiliations": [],
    }


def openalex_resolve(view: View, raw: str) -> str | None:
    """A work id as OpenAlex takes it: ``W1``, its URL, ``https://doi.org/...``, ``doi:...``."""
    raw = unquote(raw).strip()
    lower = raw.lower()
    for prefix in ("https://doi.org/", "http://doi.org/", "doi.org/", "doi:"):
        if lower.startswith(prefix):
            return view.lookup(view.by_doi.get(lower[len(prefix) :]))
    if lower.startswith("10."):
        return view.lookup(view.by_doi.get(lower))
    return view.lookup(view.from_work(raw))


def _filter_ids(view: View, key: str, values: list[str]) -> list[str] | None:
    """Works named by an id filter; None when ``key`` is not an id filter."""
    if key in ("doi", "openalex", "ids.openalex"):
        found = (openalex_resolve(view, ("doi:" if key == "doi" else "") + v) for v in values)
        return [a for a in found if a]
    if key in ("cites", "referenced_works", "cited_by"):
        graph = view.cites if key != "cited_by" else view.refs  # cites:W = works citing W
        out: set[str] = set()
        for v in values:
            acl = view.from_work(v)
            out.update(graph.get(acl, ()) if acl else ())
        return [a for a in out if a not in view.missing]
    return None


def _filter_test(view: View, key: str, values: list[str]) -> Callable[[str], bool] | None:
    """A predicate for a non-id filter; None when OpenAlex would not know ``key``."""
    papers = view.graph.papers
    if key == "publication_year":
        ranges = [_year_range(v.replace(">", "").replace("<", "")) for v in values]
        return lambda a: any(lo <= (papers[a].year or 0) <= hi for lo, hi in ranges)
    if key in ("from_publication_date", "to_publication_date"):
        year = int(values[0][:4]) if values[0][:4].isdigit() else 0
        if key == "from_publication_date":
            return lambda a: (papers[a].year or 0) >= year
        return lambda a: (papers[a].year or 0) <= year
    if key in ENTITY_FILTERS:
        wanted = {v.rsplit("/", 1)[-1].upper() for v in values}
        return lambda a: entity_ids(view, a, key) & wanted != set()
    if key in ("title.search", "title_and_abstract.search", "default.search", "abstract.search"):
        hits = {a for v in values for a in view.matches(v)}
        if key == "title.search":
            hits = {
                a
                for a in hits
                if all(w in norm_title(papers[a].title).split() for w in norm_title(values[0]).split())
            }
        return hits.__contains__
    return None


def openalex_select(view: View, query: dict[str, list[str]]) -> list[str] | Reply:
    """The works a ``/works`` list answers, in id order, or OpenAlex's 400 for an unknown filter."""
    chosen: set[str] | None = None
    tests: list[Callable[[str], bool]] = []
    for part in filter(None, query.get("filter", [""])[0].split(",")):
        key, _, value = part.partition(":")
        values = [v for v in value.split("|") if v]
        ids = _filter_ids(view, key.strip(), values)
        if ids is not None:
            chosen = set(ids) if chosen is None else chosen & set(ids)
            continue
        test = _filter_test(view, key.strip(), values)
        if test is None:
            return openalex_error(f"{key} is not a valid field.")
        tests.append(test)
    if query.get("search", [""])[0]:
        tests.append(set(view.matches(query["search"][0])).__contains__)
    pool: Iterable[str] = sorted(view.visible - view.missing) if chosen is None else chosen
    return sorted((a for a in pool if all(t(a) for t in tests)), key=view.index.__getitem__)


class Cursors:
    """OpenAlex cursors: opaque, bound to their query, and expiring when the options say so."""

    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg

    @staticmethod
    def query_key(query: dict[str, list[str]]) -> str:
        keep = {k: v for k, v in sorted(query.items()) if k in ("filter", "search", "sort")}
        return hashlib.sha1(json.dumps(keep).encode()).hexdigest()[:12]

    def make(self, query: dict[str, list[str]], offset: int, served: int) -> str:
        raw = json.dumps({"q": self.query_key(query), "o": offset, "n": served}).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def read(self, query: dict[str, list[str]], cursor: str, served: int, attempt: int) -> int | str:
        """The offset a cursor stands for, or why it is refused."""
        if cursor == "*":
            return 0
        try:
            obj = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
            offset, issued = int(obj["o"]), int(obj["n"])
        except (ValueError, KeyError, TypeError):
            return "invalid cursor"
        if obj.get("q") != self.query_key(query):
            return "cursor does not belong to this query"
        ttl = self.cfg.cursor_ttl_requests
        if (ttl and served - issued > ttl) or (
            attempt == 0 and chance(self.cfg.seed, "cursor", cursor) < self.cfg.cursor_expire_rate
        ):
            return "cursor expired; start again with cursor=*"
        return offset


def openalex_list(sim: SimState, query: dict[str, list[str]], attempt: int) -> Reply:
    """``/works``: filters, then a page by ``cursor`` (``next_cursor`` until an empty page) or by
    ``page``; ``per-page`` up to 200; ``select`` keeps the named keys."""
    view = sim.view
    per_page = _int_param(query, "per-page", 25) if "per-page" in query else _int_param(query, "per_page", 25)
    if per_page is None or not 1 <= per_page <= 200:
        return openalex_error("per-page parameter must be between 1 and 200")
    select = _select(query)
    if isinstance(select, Reply):
        return select
    found = openalex_select(view, query)
    if isinstance(found, Reply):
        return found
    meta: dict[str, object] = {"count": len(found), "db_response_time_ms": 1}
    if "cursor" in query:
        offset = sim.cursors.read(query, query["cursor"][0], sim.stats.requests, attempt)
        if isinstance(offset, str):
            return openalex_error(offset)
        page = found[offset : offset + per_page]
        nxt = sim.cursors.make(query, offset + per_page, sim.stats.requests) if page else None
        meta.update(page=None, per_page=per_page, next_cursor=nxt, groups_count=None)
    else:
        number = _int_param(query, "page", 1)
        if number is None or number < 1 or number * per_page > 10_000:
            return openalex_error("Maximum results size of 10,000 records is exceeded. Use cursor paging.")
        page = found[(number - 1) * per_page : number * per_page]
        meta.update(page=number, per_page=per_page, groups_count=None)
    results = [_selected(openalex_work(view, a), select) for a in page]
    return json_reply({"meta": meta, "results": results, "group_by": []})


def _select(query: dict[str, list[str]]) -> list[str] | None | Reply:
    raw = query.get("select", [""])[0]
    names = [n.strip() for n in raw.split(",") if n.strip()]
    bad = [n for n in names if n not in WORK_KEYS]
    if bad:
        return openalex_error(
            f"{bad[0]} is not a valid select field. Valid fields for select are: {', '.join(WORK_KEYS)}."
        )
    return names or None


def _selected(work: dict, select: list[str] | None) -> dict:
    return work if select is None else {k: work[k] for k in select}


# -- OpenAlex sources and topic hierarchy (what --venue and --field resolve names against) -----------
# OpenAlex's 26 fields (ids and names as its API lists them); the data has no topics, so every
# Anthology paper is filed, by a stable hash, under one of three topics of the subfield
# "Artificial Intelligence" (field 17, Computer Science), as OpenAlex files most ACL papers.
OPENALEX_FIELDS = dict(
    enumerate(
        "Agricultural and Biological Sciences|Arts and Humanities|Biochemistry, Genetics and Molecular Biology|"
        "Business, Management and Accounting|Chemical Engineering|Chemistry|Computer Science|Decision Sciences|"
        "Earth and Planetary Sciences|Economics, Econometrics and Finance|Energy|Engineering|"
        "Environmental Science|Immunology and Microbiology|Materials Science|Mathematics|Medicine|Neuroscience|"
        "Nursing|Pharmacology, Toxicology and Pharmaceutics|Physics and Astronomy|Psychology|Social Sciences|"
        "Veterinary|Dentistry|Health Professions".split("|"),
        start=11,
    )
)
SUBFIELDS = {1702: ("Artificial Intelligence", 17), 1203: ("Language and Linguistics", 12),
             3310: ("Linguistics and Language", 33)}  # fmt: skip
TOPICS = {"T10181": ("Natural Language Processing Techniques", 1702), "T10028": ("Topic Modeling", 1702),
          "T12031": ("Speech and dialogue systems", 1702)}  # fmt: skip
ENTITY_PATHS = ("/sources", "/fields", "/subfields", "/topics")
ENTITY_FILTERS = {
    "primary_location.source.id": "source", "locations.source.id": "source", "primary_topic.id": "topic",
    "topics.id": "topic", "primary_topic.subfield.id": "subfield", "topics.subfield.id": "subfield",
    "primary_topic.field.id": "field", "topics.field.id": "field",
}  # fmt: skip


def source_id(venue: str) -> str:
    """A venue's stable source id (``S`` and a number from its name)."""
    return f"S{6_000_000_000 + int(hashlib.sha1(venue.encode()).hexdigest()[:8], 16)}"


def topic_of(view: View, acl: str) -> dict:
    """A work's ``primary_topic`` with its subfield, field and domain, in OpenAlex's shape."""
    r = chance(view.cfg.seed, "topic", acl)
    tid = "T10181" if r < 0.6 else "T10028" if r < 0.85 else "T12031"
    name, sub = TOPICS[tid]
    field_id = SUBFIELDS[sub][1]
    return {
        "id": f"https://openalex.org/{tid}", "display_name": name, "score": 0.99,
        "subfield": {"id": f"https://openalex.org/subfields/{sub}", "display_name": SUBFIELDS[sub][0]},
        "field": {"id": f"https://openalex.org/fields/{field_id}", "display_name": OPENALEX_FIELDS[field_id]},
        "domain": {"id": "https://openalex.org/domains/3", "display_name": "Physical Sciences"},
    }  # fmt: skip


def entity_ids(view: View, acl: str, key: str) -> set[str]:
    """The ids (upper case, no URL) a work has for the entity filter ``key``."""
    kind = ENTITY_FILTERS[key]
    if kind == "source":
        return {source_id(view.graph.papers[acl].venue)}
    topic = topic_of(view, acl)
    return {(topic if kind == "topic" else topic[kind])["id"].rsplit("/", 1)[-1].upper()}


def _entities(view: View, kind: str) -> list[dict]:
    """Every entity of ``kind`` with its works count (sources: the graph's venues)."""
    if kind == "sources":
        counts: dict[str, int] = {}
        for a in view.visible - view.missing:
            counts[view.graph.papers[a].venue] = counts.get(view.graph.papers[a].venue, 0) + 1
        return [
            {"id": f"https://openalex.org/{source_id(v)}", "display_name": v, "works_count": n,
             "type": "journal" if not v.startswith("Proceedings") else "conference", "alternate_titles": []}
            for v, n in counts.items() if v
        ]  # fmt: skip
    n = len(view.visible - view.missing)
    if kind == "fields":
        return [{"id": f"https://openalex.org/fields/{i}", "display_name": name,
                 "works_count": n if i == 17 else 0} for i, name in OPENALEX_FIELDS.items()]  # fmt: skip
    if kind == "subfields":
        return [{"id": f"https://openalex.org/subfields/{i}", "display_name": name,
                 "field": {"id": f"https://openalex.org/fields/{f}", "display_name": OPENALEX_FIELDS[f]},
                 "works_count": n if i == 1702 else 0} for i, (name, f) in SUBFIELDS.items()]  # fmt: skip
    return [{"id": f"https://openalex.org/{t}", "display_name": name,
             "subfield": {"id": f"https://openalex.org/subfields/{s}", "display_name": SUBFIELDS[s][0]},
             "works_count": 0} for t, (name, s) in TOPICS.items()]  # fmt: skip


def entity_list(view: View, kind: str, query: dict[str, list[str]]) -> Reply:
    """``/sources``, ``/fields``, ``/subfields``, ``/topics`` with ``search=`` (every word in the
    name), most works first, ``per-page`` (25) and ``page``."""
    per_page = _int_param(query, "per-page", 25) if "per-page" in query else _int_param(query, "per_page", 25)
    number = _int_param(query, "page", 1)
    if per_page is None or not 1 <= per_page <= 200 or number is None or number < 1:
        return openalex_error("per-page parameter must be between 1 and 200")
    words = norm_title(query.get("search", [""])[0]).split()
    found = [
        e for e in _entities(view, kind) if all(w in norm_title(e["display_name"]).split() for w in words)
    ]
    found.sort(key=lambda e: (-e["works_count"], e["display_name"]))
    meta = {"count": len(found), "db_response_time_ms": 1, "page": number, "per_page": per_page}
    return json_reply({"meta": meta, "results": found[(number - 1) * per_page : number * per_page]})


def route_openalex(sim: SimState, path: str, query: dict[str, list[str]], attempt: int) -> Reply:
    """Dispatch one OpenAlex request: ``/works`` or ``/works/{id}``."""
    if path.rstrip("/") == "/works":
        return openalex_list(sim, query, attempt)
    if path.rstrip("/") in ENTITY_PATHS:
        return entity_list(sim.view, path.strip("/"), query)
    acl = openalex_resolve(sim.view, path[len("/works/") :])
    if acl is None:
        return Reply(404, OPENALEX_404, "text/html; charset=utf-8")
    select = _select(query)
    if isinstance(select, Reply):
        return select
    return json_reply(_selected(openalex_work(sim.view, acl), select))


def route_elsewhere(path: str) -> Reply:
    """Crossref and arXiv answer "nothing here", as for a DOI or id they do not hold."""
    if path.startswith("/arxiv"):
        feed = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom" '
            'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"><opensearch:totalResults>0'
            "</opensearch:totalResults></feed>\n"
        )
        return Reply(200, feed.encode(), "application/atom+xml; charset=utf-8")
    if re.fullmatch(r"/crossref/works/?", path):
        body = {"status": "ok", "message-type": "work-list", "message": {"total-results": 0, "items": []}}
        return json_reply(body)
    return Reply(404, b"Resource not found.", "text/plain")


# -- the server's state: counters, rate limits, faults -------------------------------------------
@dataclass
class Stats:
    """What was served: the speed figure is ``ok`` over the span from the first to the last."""

    requests: int = 0
    ok: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    by_api: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    first_at: float | None = None
    last_at: float | None = None
    ok_first_at: float | None = None
    ok_last_at: float | None = None
    serve_seconds: float = 0.0  # building the answers: what the simulator itself took

    def as_dict(self) -> dict:
        out = dict(self.__dict__)
        span = (self.ok_last_at or 0) - (self.ok_first_at or 0)
        out["ok_per_second"] = round((self.ok - 1) / span, 4) if self.ok > 1 and span > 0 else None
        return out


class Bucket:
    """A token bucket: ``rate`` requests a second, ``burst`` at once. A request arriving up to
    ``jitter`` seconds early is let through (its token is borrowed from the next slot), so a client
    pacing itself at exactly the rate is not refused for the scheduling jitter of a loaded machine;
    the long-run rate stays ``rate``."""

    def __init__(self, rate: float, burst: int, jitter: float = 0.05) -> None:
        self.rate, self.capacity = rate, max(1, burst)
        self.slack = min(0.9, rate * jitter)
        self.tokens, self.stamp = float(self.capacity), time.monotonic()

    def take(self) -> float:
        """0 when the request may go, else the seconds until it may (the caller holds the lock)."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1 - self.slack:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


class SimState:
    """Everything the handler threads share, behind one lock."""

    def __init__(self, graph: Graph, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.view = View(graph, cfg)
        self.cursors = Cursors(cfg)
        self.lock = threading.Lock()
        self.stats = Stats()
        self.attempts: dict[str, int] = {}
        self.buckets = {
            "s2": Bucket(cfg.s2_rate, cfg.burst, cfg.jitter_seconds),
            "openalex": Bucket(cfg.openalex_rate, cfg.burst, cfg.jitter_seconds),
        }

    def admit(self, api: str, key: str) -> tuple[int, float]:
        """Count the request; return how many times it came before and the wait the limiter asks."""
        with self.lock:
            now = time.monotonic()
            self.stats.requests += 1
            self.stats.first_at = self.stats.first_at or now
            self.stats.last_at = now
            self.stats.by_api[api] = self.stats.by_api.get(api, 0) + 1
            wait = self.buckets[api].take() if api in self.buckets else 0.0
            if wait:
                return -1, wait
            attempt = self.attempts.get(key, 0)
            self.attempts[key] = attempt + 1
            return attempt, 0.0

    def fault(self, key: str, attempt: int) -> str | None:
        """The fault this request meets, fixed by the seed, the request and its attempt number."""
        cfg = self.cfg
        for kind, rate in (
            ("error", cfg.error_rate),
            ("slow", cfg.slow_rate),
            ("truncate", cfg.truncate_rate),
        ):
            if rate and chance(cfg.seed, kind, key, attempt) < rate:
                return kind
        return None

    def record(self, status: int, fault: str | None, seconds: float = 0.0) -> None:
        with self.lock:
            self.stats.serve_seconds += seconds
            self.stats.by_status[str(status)] = self.stats.by_status.get(str(status), 0) + 1
            if fault:
                self.stats.faults[fault] = self.stats.faults.get(fault, 0) + 1
            if 200 <= status < 300 and fault is None:
                now = time.monotonic()
                self.stats.ok += 1
                self.stats.ok_first_at = self.stats.ok_first_at or now
                self.stats.ok_last_at = now

    def reset(self) -> None:
        with self.lock:
            self.stats = Stats()
            self.attempts.clear()


def _api_of(path: str) -> str:
    if path.startswith(("/graph/v1/", "/paper/")):
        return "s2"
    if path == "/works" or path.startswith("/works/") or path.rstrip("/") in ENTITY_PATHS:
        return "openalex"
    return "other"


def rate_limited(api: str, wait: float, retry_after: bool) -> Reply:
    """429 in each API's words, with ``Retry-After`` in whole seconds (at least 1)."""
    if api == "s2":
        text = "Too Many Requests. Please wait and try again or apply for a key for higher rate limits."
        reply = json_reply({"message": text, "code": "429"}, 429)
    else:
        reply = json_reply({"error": "Rate limit exceeded", "message": "Too many requests"}, 429)
    if retry_after:
        reply.headers["Retry-After"] = str(max(1, math.ceil(wait)))
    return reply


class Handler(BaseHTTPRequestHandler):
    """One request: stats endpoints, then the limiter, the seeded faults, and the API's answer."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the real APIs; a truncated body closes the connection
    server: SimServer

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        if self.server.verbose:
            super().log_message(format, *args)

    def _handle(self, method: str) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        if parts.path.startswith("/_sim/"):
            self._send(self._control(method, parts.path), truncate=False)
            return
        api = _api_of(parts.path)
        key = f"{method} {self.path} {hashlib.sha1(body).hexdigest()}"
        attempt, wait = state.admit(api, key)
        if wait:
            reply = rate_limited(api, wait, state.cfg.retry_after)
            state.record(reply.status, "rate_limited")
            self._send(reply, truncate=False)
            return
        fault = state.fault(key, attempt)
        if fault == "slow":
            time.sleep(state.cfg.slow_seconds)
        t0 = time.perf_counter()
        reply = (
            s2_error(500, "Internal Server Error")
            if fault == "error"
            else self._answer(method, parts.path, query, body, attempt)
        )
        state.record(reply.status, fault, time.perf_counter() - t0)
        self._send(reply, truncate=fault == "truncate")

    def _answer(
        self, method: str, path: str, query: dict[str, list[str]], body: bytes, attempt: int
    ) -> Reply:
        state = self.server.state
        api = _api_of(path)
        if api == "s2":
            return route_s2(state.view, method, path, query, body)
        if api == "openalex":
            return route_openalex(state, path, query, attempt)
        return route_elsewhere(path)

    def _control(self, method: str, path: str) -> Reply:
        state = self.server.state
        if path == "/_sim/reset" and method == "POST":
            state.reset()
            return json_reply({"reset": True})
        if path == "/_sim/stats":
            with state.lock:
                return json_reply(state.stats.as_dict())
        return json_reply({"error": "unknown control path"}, 404)

    def _send(self, reply: Reply, truncate: bool) -> None:
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if truncate:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(reply.body[: len(reply.body) // 2] if truncate else reply.body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout, kill -9)
            pass
        if truncate:
            self.close_connection = True


class SimServer(ThreadingHTTPServer):
    """The loopback server; daemon threads, so a slow answer never holds up the shutdown."""

    daemon_threads = True
    block_on_close = False
    state: SimState
    verbose: bool = False


# -- running it ------------------------------------------------------------------------------------
class Simulator:
    """The simulated APIs on a free loopback port, as a context manager for tests and benchmarks."""

    def __init__(
        self,
        cfg: SimConfig | None = None,
        *,
        graph: Graph | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        verbose: bool = False,
    ) -> None:
        if host not in LOOPBACK:
            raise ValueError(f"the simulator binds loopback addresses only, not {host!r}")
        self.cfg = cfg or SimConfig()
        self._graph, self._host, self._port, self._verbose = graph, host, port, verbose
        self.server: SimServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Simulator:
        graph = self._graph or load_graph(self.cfg.data)
        host = "127.0.0.1" if self._host == "localhost" else self._host
        server_cls = SimServer
        if ":" in host:
            server_cls = type("SimServer6", (SimServer,), {"address_family": __import__("socket").AF_INET6})
        self.server = server_cls((host, self._port), Handler)
        self.server.state = SimState(graph, self.cfg)
        self.server.verbose = self._verbose
        self._thread = threading.Thread(target=self.server.serve_forever, name="fetch-sim", daemon=True)
        self._thread.start()
        return self

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    @property
    def url(self) -> str:
        assert self.server is not None, "start the simulator first"
        host, port = self.server.server_address[:2]
        return f"http://[{host}]:{port}" if ":" in str(host) else f"http://{host}:{port}"

    @property
    def view(self) -> View:
        assert self.server is not None
        return self.server.state.view

    def env(self) -> dict[str, str]:
        """The environment that points ``citewise fetch`` at this server for every API."""
        return {
            "CITEWISE_S2_URL": f"{self.url}/graph/v1",
            "CITEWISE_OPENALEX_URL": self.url,
            "CITEWISE_CROSSREF_URL": f"{self.url}/crossref",
            "CITEWISE_ARXIV_URL": f"{self.url}/arxiv",
        }

    def stats(self) -> dict:
        assert self.server is not None
        with self.server.state.lock:
            return self.server.state.stats.as_dict()

    def reset(self) -> None:
        assert self.server is not None
        self.server.state.reset()


def config_from_args(args: argparse.Namespace) -> SimConfig:
    missing = frozenset(m for m in (args.missing or "").split(",") if m)
    return SimConfig(
        data=args.data,
        hide_dev=args.hide_dev,
        seed=args.seed,
        s2_rate=args.s2_rate,
        openalex_rate=args.openalex_rate,
        burst=args.burst,
        jitter_seconds=args.jitter,
        retry_after=args.retry_after,
        error_rate=args.error_rate,
        slow_rate=args.slow_rate,
        slow_seconds=args.slow_seconds,
        truncate_rate=args.truncate_rate,
        cursor_expire_rate=args.cursor_expire_rate,
        cursor_ttl_requests=args.cursor_ttl_requests,
        missing=missing,
        missing_rate=args.missing_rate,
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1", choices=LOOPBACK, help="loopback only")
    ap.add_argument("--port", type=int, default=0, help="0: a free port")
    ap.add_argument("--print-url", action="store_true", help="print the base URL on stdout once serving")
    ap.add_argument("--print-env", action="store_true", help="print CITEWISE_*_URL=... lines once serving")
    ap.add_argument("--build-cache", action="store_true", help="build the graph's cache and exit")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument(
        "--hide-dev",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve nothing of the ACL dev years 2013-2014 (default: on)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--s2-rate", type=float, default=0.0, help=f"requests/s (public S2: {S2_PUBLIC_RATE}); 0: none"
    )
    ap.add_argument("--openalex-rate", type=float, default=0.0, help="requests/s; 0: none")
    ap.add_argument("--burst", type=int, default=1)
    ap.add_argument("--jitter", type=float, default=0.05, help="seconds early a request may still pass")
    ap.add_argument("--retry-after", action=argparse.BooleanOptionalAction, default=True)
    for name in ("error", "slow", "truncate", "cursor-expire", "missing"):
        ap.add_argument(f"--{name}-rate", type=float, default=0.0)
    ap.add_argument("--slow-seconds", type=float, default=30.0)
    ap.add_argument("--cursor-ttl-requests", type=int, default=0)
    ap.add_argument("--missing", default="", help="comma-separated Anthology ids that 404")
    ap.add_argument("--verbose", action="store_true")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.build_cache:
        graph = load_graph(args.data)
        print(json.dumps({"papers": len(graph.papers), "cache": str(_cache_path(args.data))}))
        return
    sim = Simulator(config_from_args(args), port=args.port, host=args.host, verbose=args.verbose).start()
    if args.print_url:
        print(sim.url, flush=True)
    if args.print_env:
        print("\n".join(f"{k}={v}" for k, v in sim.env().items()), flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        while not done.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    sim.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
