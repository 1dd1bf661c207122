"""Every open source's citation knowledge, end to end through the real server (issue 25's target:
"a completion through the language server that ranks a paper by what its citing sentences say").

For each importer, two small stores are built from its real sample: one with the papers alone,
one with the source's citation knowledge too, and the same draft sentence (a paraphrase of what
the citers wrote) is completed in ``\\cite{}`` on each. The cited paper must rank first with the
knowledge and lower (or not at all) without it, so the rise is the citation knowledge's doing:

- S2AG ``citations``: the citing sentences (``contexts``) of the real sample, and one row of the
  later release shape written here; the cited papers are real ``papers`` rows given the cited
  corpus ids (the samples were drawn apart), so their titles say nothing of the sentence.
- unarXive: the sentences around the real sample's citation spans; the cited paper (Lipshitz,
  Ozsvath and Thurston, "Bordered Heegaard Floer homology", arXiv:0810.0687, from the sample's
  bibliography entry) is written as an arXiv snapshot line with its title only.
- OpenAlex and Crossref: edges only (``referenced_works``, ``reference[].DOI``), so what lifts the
  cited paper is the count prior and its citers' titles (docs/citation-expansion.md). The cited
  work is the one most cited in the sample, written here beside an uncited twin whose title
  matches the sentence a little better; the twin leads without the edges, the cited work with them.

The reranker is off: the claim is about the first stage, where citation knowledge enters. Each
store holds a few hundred papers at most, so every test runs in seconds.
"""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store

from ..lsp_harness import REINDEX, Session, start, stop
from ..source_samples import read_jsonl, sample, write_jsonl

pytestmark = pytest.mark.asyncio

OPTIONS = {"rerank": False}


def latex(sentence: str) -> str:
    return f"\\documentclass{{article}}\n\\begin{{document}}\n{sentence} \\cite{{}}.\n\\end{{document}}\n"


def build(folder: Path, sources: list[Path]) -> Path:
    """A store of ``sources`` (imported together, as ``citewise index`` would)."""
    folder.mkdir(parents=True)
    store = Store(folder / "papers.sqlite")
    stats = import_sources(store, sources)
    assert stats.broken == 0, stats.problems[:3]
    store.close()
    return folder / "papers.sqlite"


def shown_title(item: types.CompletionItem) -> str:
    """The title the menu shows beside the key ('Title (Author Year, Venue)', a long title cut
    with an ellipsis), without the ellipsis: a prefix of the paper's title."""
    description = item.label_details.description if item.label_details else ""
    return (description or "").rsplit(" (", 1)[0].removesuffix("\u2026")


async def rank_of(
    store: Path, root: Path, sentence: str, titles: list[str]
) -> tuple[list[int | None], Session]:
    """Start the server on ``store``, complete ``\\cite{}`` after ``sentence``; the place of each
    title in the list (None: not offered). The session is returned still running (the caller
    stops it)."""
    root.mkdir(exist_ok=True)
    session = await start(root, store, options=OPTIONS)
    uri = session.open(f"{store.parent.name}.tex", latex(sentence))
    shown = [shown_title(i) for i in (await session.complete_final(uri, "\\cite{")).items]
    places = [next((n for n, s in enumerate(shown) if s and t.startswith(s)), None) for t in titles]
    return places, session


async def compare(
    tmp_path: Path, without: list[Path], with_: list[Path], sentence: str, title: str, twin: str = ""
) -> Session:
    """The cited paper's place without and with the citation knowledge: first with it, not first
    (or not offered) without; with a ``twin``, that twin is offered before the cited paper without
    the knowledge (so the rise is the citations' doing, not the title's). Returns the running
    session on the store with the knowledge (stopped by the caller)."""
    titles = [title, twin] if twin else [title]
    before, session = await rank_of(build(tmp_path / "without", without), tmp_path / "ws", sentence, titles)
    await stop(session)
    (after, *_), session = await rank_of(build(tmp_path / "with", with_), tmp_path / "ws", sentence, titles)
    assert after == 0, f"{title!r} is not first with the citation knowledge (place {after})"
    assert before[0] is None or before[0] > 0, f"{title!r} was first already without it (place {before[0]})"
    if twin:
        assert before[1] is not None and (before[0] is None or before[1] < before[0]), before
    return session


# -- Semantic Scholar Academic Graph: citations with contexts ------------------------------------
S2_VOICE = "Recent approaches use voice search to query a database directly with noisy ASR"
# The later release shape (``citationid``, one intents list per context), written here: the
# sample is of the early shape. Its sentence has words that only it has in the store.
S2_LATER = {
    "citationid": 1,
    "citingcorpusid": 900000001,
    "citedcorpusid": None,  # set to a real paper's corpus id below
    "isinfluential": True,
    "contexts": ["Fermenting the rice bran with koji lowered the glycemic index of the bread."],
    "intents": [["methodology"]],
}


def s2ag_files(folder: Path) -> tuple[Path, Path, str, str]:
    """Real ``papers`` rows given the corpus ids that the real ``citations`` rows with contexts cite
    (one paper each), and the later-shape row citing another real paper; returns the papers file,
    that row's file, and the titles of the papers that the voice-search sentence and the row cite."""
    folder.mkdir()
    rows = read_jsonl(sample("s2ag", "citations", "citations-sample.jsonl"))
    cited = list(dict.fromkeys(r["citedcorpusid"] for r in rows if r["contexts"] and r["citedcorpusid"]))
    voice = next(r["citedcorpusid"] for r in rows if any(S2_VOICE in c for c in r["contexts"] or []))
    papers = read_jsonl(sample("s2ag", "papers", "papers-sample.jsonl"))
    for paper, corpus_id in zip(papers, cited, strict=False):
        paper["corpusid"] = int(corpus_id)
        paper["externalids"] = {"CorpusId": str(corpus_id)}
    later_paper = papers[len(cited)]
    row = {**S2_LATER, "citedcorpusid": str(later_paper["corpusid"])}
    voice_title = next(p["title"] for p in papers if p["corpusid"] == int(voice))
    return (
        write_jsonl(folder / "papers.jsonl", papers),
        write_jsonl(folder / "citations-later.jsonl", [row]),
        voice_title,
        later_paper["title"],
    )


async def test_s2ag_citing_sentences_rank_the_cited_paper(tmp_path: Path) -> None:
    papers, later, voice_title, later_title = s2ag_files(tmp_path / "files")
    citations = sample("s2ag", "citations", "citations-sample.jsonl")
    session = await compare(
        tmp_path,
        [papers],
        [papers, citations, later],
        "Spoken queries can look up a database straight from noisy ASR output through voice search",
        voice_title,
    )
    try:
        # The later-shape row's sentence, paraphrased, on the same server.
        uri = session.open(
            "later.tex", latex("Koji fermentation of rice bran gives bread a lower glycemic index")
        )
        items = (await session.complete_final(uri, "\\cite{")).items
        assert later_title.startswith(shown_title(items[0])), [shown_title(i) for i in items[:5]]
        # The status tooltip's summary: what the citations files gave, and that they reach papers.
        status = await session.poll(
            lambda: _with_sources_of(session), "the source summary in citewise.status"
        )
        kinds = {s["kind"]: s for s in status["sources"]}
        assert kinds["s2ag-papers"]["papers"] == 100
        stored = {str(p["corpusid"]) for p in read_jsonl(papers)}
        pairs = {
            (r["citingcorpusid"], r["citedcorpusid"]) for r in read_jsonl(citations) if r["citedcorpusid"]
        }
        cites = kinds["s2ag-citations"]
        assert (cites["files"], cites["edges"]) == (2, len(pairs) + 1)  # the sample's pairs and the row
        assert cites["resolvedEdges"] == sum(cited in stored for _, cited in pairs) + 1 > 1
        assert cites["sentences"] > 1
        # A changed file, reindexed: the next status polls show the new summary (cached per store
        # generation, recomputed in the index thread).
        row = read_jsonl(later)[0]
        write_jsonl(later, [row, {**row, "citingcorpusid": 900000002, "contexts": ["Koji again."]}])
        assert (await session.command(REINDEX, {}))["done"]
        again = await session.poll(
            lambda: _with_sources_of(session, lambda k: k["s2ag-citations"]["edges"] == cites["edges"] + 1),
            "the summary after the reindex",
        )
        grown = {s["kind"]: s for s in again["sources"]}["s2ag-citations"]
        assert (grown["resolvedEdges"], grown["sentences"]) == (
            cites["resolvedEdges"] + 1,
            cites["sentences"] + 1,
        )
    finally:
        await stop(session)


async def _with_sources_of(session: Session, ok: Callable[[dict], bool] = lambda kinds: True) -> dict | None:
    """The status when it carries a source summary that ``ok`` accepts (by kind), else None."""
    status = await session.status()
    kinds = {s["kind"]: s for s in status.get("sources") or []}
    return status if kinds and ok(kinds) else None


# -- unarXive: citation spans ------------------------------------------------------------------
BORDERED = {  # from the sample's bibliography entry for arXiv:0810.0687 (title, authors, DOI, journal)
    "id": "0810.0687",
    "authors": "Robert Lipshitz, Peter S. Ozsvath, Dylan P. Thurston",
    "title": "Bordered Heegaard Floer homology",
    "journal-ref": "Mem. Amer. Math. Soc. 254(1216), 2018",
    "doi": "10.1090/memo/1216",
    "categories": "math.GT math.SG",
    "abstract": "",
    "authors_parsed": [["Lipshitz", "Robert", ""], ["Ozsvath", "Peter S.", ""], ["Thurston", "Dylan P.", ""]],
}


def arxiv_line(folder: Path, fields: dict[str, Any]) -> Path:
    """One arXiv snapshot line: the sample's first line (its shape) with ``fields`` over it."""
    template = read_jsonl(sample("arxiv", "arxiv-metadata-oai-snapshot.first200.jsonl"))[0]
    folder.mkdir(exist_ok=True)
    return write_jsonl(folder / "arxiv-cited.jsonl", [{**template, **fields}])


async def test_unarxive_citation_spans_rank_the_cited_paper(tmp_path: Path) -> None:
    cited = arxiv_line(tmp_path / "files", BORDERED)
    snapshot = sample("arxiv", "arxiv-metadata-oai-snapshot.first200.jsonl")
    unarxive = sample("unarxive", "arXiv_src_2212_086.jsonl")
    # "closely connected to the strands algebras which have appeared in bordered Floer homology",
    # "The algebras we define here have their origin in the strands algebras of ; see also":
    # the title has none of these words, the citing paper's own abstract not "strands".
    session = await compare(
        tmp_path,
        [snapshot, cited],
        [snapshot, cited, unarxive],
        "Our algebras originate in the strands algebras",
        BORDERED["title"],
    )
    await stop(session)


# -- OpenAlex and Crossref: edges only (the count prior and the citers' titles) ------------------
def openalex_files(folder: Path) -> tuple[Path, Path, Path]:
    """The real page, the page without its references, and a snapshot part (gzipped JSON Lines)
    of two works written from its first: W2781122472 (cited by four works of the page) and an
    uncited twin whose title matches the sentence a little better (it is shorter)."""
    folder.mkdir()
    page_path = sample("openalex", "works_api_page_peneira_2024.json")
    page = json.loads(page_path.read_text(encoding="utf-8"))
    cited_by = [
        w for w in page["results"] if "https://openalex.org/W2781122472" in (w["referenced_works"] or [])
    ]
    assert len(cited_by) == 4
    bare = copy.deepcopy(page)
    for work in bare["results"]:
        work["referenced_works"] = []
    stripped = folder / "page-without-references.json"
    stripped.write_text(json.dumps(bare), encoding="utf-8")
    part = folder / "part_000.gz"
    with gzip.open(part, "wt", encoding="utf-8") as fh:
        for wid, title in ((CITED_W, CITED_TITLE), ("W1000000001", TWIN_TITLE)):
            fh.write(json.dumps(_work(page["results"][0], wid, title)) + "\n")
    return page_path, stripped, part


CITED_W = "W2781122472"
CITED_TITLE = (
    "Syndromic surveillance of influenza from emergency department visits in regional hospital networks"
)
TWIN_TITLE = "Influenza syndromic surveillance from emergency department visits"
OUTBREAK = "We run syndromic surveillance of influenza from emergency department visits"


def _work(template: dict[str, Any], wid: str, title: str) -> dict[str, Any]:
    work = copy.deepcopy(template)
    work.update(
        id=f"https://openalex.org/{wid}",
        doi=None,
        ids={"openalex": f"https://openalex.org/{wid}"},
        title=title,
        display_name=title,
        abstract_inverted_index=None,
        referenced_works=[],
        related_works=[],
        authorships=[],
    )
    return work


async def test_openalex_edges_lift_the_cited_work(tmp_path: Path) -> None:
    page, stripped, part = openalex_files(tmp_path / "files")
    session = await compare(tmp_path, [stripped, part], [page, part], OUTBREAK, CITED_TITLE, TWIN_TITLE)
    await stop(session)


# Crossref: Polasky, Carpenter, Folke and Keeler (2011), cited by six works of the sample (their
# reference lists give its title, authors, journal and pages).
POLASKY_DOI = "10.1016/j.tree.2011.04.007"
POLASKY = "Decision-making under great uncertainty: environmental management in an era of global change"
POLASKY_TWIN = "Environmental management under great uncertainty"


def crossref_files(folder: Path) -> tuple[Path, Path, Path]:
    """The real works, the works without their reference lists, and two works written in their
    shape: Polasky et al. and an uncited twin."""
    folder.mkdir()
    works_path = sample("crossref", "works_query_ecology_boettiger_20items.jsonl")
    works = read_jsonl(works_path)
    citing = [
        w for w in works if any(r.get("DOI", "").lower() == POLASKY_DOI for r in w.get("reference", []))
    ]
    assert len(citing) == 6
    bare = [{k: v for k, v in w.items() if k != "reference"} for w in works]
    written = [
        _crossref_work(works[0], POLASKY_DOI, POLASKY, "Polasky", 2011),
        _crossref_work(works[0], "10.5555/twin.2011", POLASKY_TWIN, "Keller", 2011),
    ]
    return (
        works_path,
        write_jsonl(folder / "works-bare.jsonl", bare),
        write_jsonl(folder / "cited.jsonl", written),
    )


def _crossref_work(template: dict[str, Any], doi: str, title: str, family: str, year: int) -> dict[str, Any]:
    keep = ("type", "publisher", "member", "prefix", "source", "content-domain")
    work = {k: copy.deepcopy(template[k]) for k in keep if k in template}
    work.update(
        DOI=doi,
        title=[title],
        author=[{"family": family, "given": "S.", "sequence": "first"}],
        issued={"date-parts": [[year]]},
        **{"container-title": ["Trends in Ecology & Evolution"]},
    )
    return work


async def test_crossref_references_lift_the_cited_work(tmp_path: Path) -> None:
    works, bare, cited = crossref_files(tmp_path / "files")
    sentence = "We plan environmental management under great uncertainty"
    session = await compare(tmp_path, [bare, cited], [works, cited], sentence, POLASKY, POLASKY_TWIN)
    await stop(session)
