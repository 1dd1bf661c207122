"""ACL Anthology XML importer: ids, markup, metadata, errors, streaming, and the real Anthology."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from lxml import etree

from citewise.indexer import acl_xml
from citewise.indexer.acl_xml import (
    build_anthology_id,
    iter_acl_xml,
    tex_math_to_text,
    year_from_collection,
)
from citewise.indexer.records import ImportProblem, PaperRecord
from citewise.indexer.store import ImportStats, Store

from ..conftest import ACL_XML, require


def write(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return str(path)


def papers(path: str) -> list[PaperRecord]:
    items = list(iter_acl_xml(path))
    problems = [i for i in items if isinstance(i, ImportProblem)]
    assert not problems, [str(p) for p in problems]
    return [i for i in items if isinstance(i, PaperRecord)]


OLD_STYLE = """<?xml version='1.0' encoding='UTF-8'?>
<collection id="P18">
  <volume id="1">
    <meta>
      <booktitle>Proceedings of the 56th Annual Meeting of the <fixed-case>ACL</fixed-case> (Volume 1)</booktitle>
      <editor><first>Iryna</first><last>Gurevych</last></editor>
      <publisher>Association for Computational Linguistics</publisher>
      <address>Melbourne, Australia</address>
      <month>July</month>
      <year>2018</year>
    </meta>
    <frontmatter>
      <url hash="de9d99e0">P18-1000</url>
    </frontmatter>
    <paper id="1">
      <title>Probabilistic <fixed-case>F</fixed-case>ast<fixed-case>T</fixed-case>ext for
        Multi-Sense   Word Embeddings</title>
      <author><first>Ben</first><last>Athiwaratkun</last></author>
      <author><last>Plato</last></author>
      <author id="a-w"><first>Andrew Gordon</first><last>Wilson</last><variant script="x"><last>W</last></variant></author>
      <pages>1–11</pages>
      <abstract>We use <b>bold <i>nested</i></b> text, see <url>https://x.org/a_b</url>.
        Cost is <tex-math>O(n^{3})</tex-math> with <tex-math>\\alpha \\rightarrow \\mathcal{O}</tex-math>.</abstract>
      <url hash="a84bb478">P18-1001</url>
      <doi>10.18653/v1/P18-1001</doi>
    </paper>
    <paper id="12">
      <title><fixed-case>BERT</fixed-case>: <i>Deep</i> Bidirectional</title>
      <abstract/>
    </paper>
  </volume>
  <volume id="2">
    <meta><booktitle>Short Papers</booktitle></meta>
    <paper id="3"><title>Short</title><abstract>   </abstract></paper>
  </volume>
</collection>
"""


def test_old_style_ids_metadata_and_markup(tmp_path: Path) -> None:
    path = write(tmp_path, "P18.xml", OLD_STYLE)
    recs = papers(path)
    assert [r.acl_id for r in recs] == ["P18-1001", "P18-1012", "P18-2003"]  # frontmatter is no paper
    first = recs[0]
    assert first.key == "P18-1001"
    assert first.title == "Probabilistic FastText for Multi-Sense Word Embeddings"
    assert first.abstract == ("We use bold nested text, see https://x.org/a_b. Cost is O(n^3) with α → O.")
    assert first.authors == ["Athiwaratkun, Ben", "Plato", "Wilson, Andrew Gordon"]
    assert first.year == 2018
    assert first.venue == "Proceedings of the 56th Annual Meeting of the ACL (Volume 1)"
    assert first.entry_type == "inproceedings"
    assert first.doi == "10.18653/v1/p18-1001"
    assert first.extra["pages"] == "1–11"
    assert first.extra["publisher"] == "Association for Computational Linguistics"
    assert first.extra["address"] == "Melbourne, Australia"
    assert first.extra["month"] == "July"
    assert first.extra["editor"] == "Gurevych, Iryna"
    assert first.extra["url"] == "https://aclanthology.org/P18-1001"
    assert first.source == path
    assert first.source_line == 15  # the line of <paper id="1">
    assert recs[1].title == "BERT: Deep Bidirectional"
    assert recs[1].abstract == "" and recs[1].authors == []
    assert recs[1].source_line == 27
    # Volume 2 has no year in its meta: the collection id gives it; no publisher leaks from volume 1.
    assert recs[2].year == 2018 and recs[2].venue == "Short Papers"
    assert "publisher" not in recs[2].extra
    assert recs[2].abstract == ""


def test_new_style_ids(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "2020.acl.xml",
        """<?xml version='1.0' encoding='UTF-8'?>
<collection id="2020.acl">
  <volume id="main" ingest-date="2020-06-30">
    <meta><booktitle>Proceedings of ACL</booktitle><year>2020</year></meta>
    <frontmatter><url hash="00000000">2020.acl-main.0</url></frontmatter>
    <paper id="1"><title>One</title></paper>
    <paper id="10"><title>Ten</title></paper>
  </volume>
  <volume id="demos"><meta><booktitle>Demos</booktitle></meta>
    <paper id="2"><title>Demo</title></paper>
  </volume>
</collection>""",
    )
    recs = papers(path)
    assert [r.acl_id for r in recs] == ["2020.acl-main.1", "2020.acl-main.10", "2020.acl-demos.2"]
    assert [r.key for r in recs] == [r.acl_id for r in recs]
    assert recs[2].year == 2020  # from the collection id


@pytest.mark.parametrize(
    ("collection", "volume", "paper", "expected"),
    [
        ("P18", "1", "1", "P18-1001"),
        ("P18", "2", "150", "P18-2150"),
        ("W18", "64", "1", "W18-6401"),  # workshops: two digits each
        ("C69", "1", "1", "C69-0101"),
        ("D19", "4", "7", "D19-4007"),
        ("D19", "59", "3", "D19-5903"),
        ("2020.acl", "main", "1", "2020.acl-main.1"),
        ("2021.gwc", "1", "40", "2021.gwc-1.40"),
    ],
)
def test_build_anthology_id(collection: str, volume: str, paper: str, expected: str) -> None:
    assert build_anthology_id(collection, volume, paper) == expected


@pytest.mark.parametrize(
    ("collection", "year"), [("J74", 1974), ("P18", 2018), ("W00", 2000), ("C65", 1965), ("2020.acl", 2020)]
)
def test_year_from_collection(collection: str, year: int) -> None:
    assert year_from_collection(collection) == year


def test_journals_are_articles(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "J10.xml",
        """<?xml version='1.0' encoding='UTF-8'?>
<collection id="J10">
  <volume id="1">
    <meta><booktitle>Computational Linguistics, Volume 36, Number 1, March 2010</booktitle></meta>
    <frontmatter/>
    <paper id="1"><title>Parsing</title><pages>1-30</pages></paper>
  </volume>
</collection>""",
    )
    (rec,) = papers(path)
    assert rec.entry_type == "article"
    assert rec.venue == "Computational Linguistics"
    assert rec.extra["volume"] == "36" and rec.extra["number"] == "1"
    assert rec.year == 2010 and rec.acl_id == "J10-1001"

    tacl = write(
        tmp_path,
        "2020.tacl.xml",
        """<collection id="2020.tacl"><volume id="1">
<meta><booktitle>Transactions of the Association for Computational Linguistics, Volume 8</booktitle><year>2020</year></meta>
<paper id="5"><title>T</title></paper></volume></collection>""",
    )
    (rec,) = papers(tacl)
    assert (rec.entry_type, rec.venue, rec.extra["volume"]) == (
        "article",
        "Transactions of the Association for Computational Linguistics",
        "8",
    )

    # A workshop volume whose papers name their own journal (W16's Baltic Journal papers).
    own = write(
        tmp_path,
        "W16.xml",
        """<collection id="W16"><volume id="62">
<meta><booktitle>Some Workshop</booktitle><year>2016</year></meta>
<paper id="1"><title>B</title><journal>Baltic Journal of Modern Computing</journal><volume>4</volume><issue>2</issue></paper>
</volume></collection>""",
    )
    (rec,) = papers(own)
    assert rec.entry_type == "article" and rec.venue == "Baltic Journal of Modern Computing"
    assert rec.extra["volume"] == "4" and rec.extra["number"] == "2"
    assert rec.acl_id == "W16-6201"


@pytest.mark.parametrize(
    ("tex", "text"),
    [
        ("n", "n"),
        ("F_1", "F_1"),
        ("\\rightarrow", "→"),
        ("O(n^{2}\\varepsilon^{-2})", "O(n^2ε^-2)"),
        ("\\mathcal{O}(n^{2h + 1})", "O(n^2h + 1)"),
        ("n \\log_2 \\frac{m}{n} + o(m)", "n log_2 m/n + o(m)"),
        ("\\{mt, src\\} \\rightarrow pe", "{mt, src} → pe"),
        ("$x$", "x"),
        ("\\alpha x", "α x"),
    ],
)
def test_tex_math(tex: str, text: str) -> None:
    assert tex_math_to_text(tex) == text


def test_comments_and_entities_are_not_text(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "P99.xml",
        """<collection id="P99"><volume id="1"><meta><booktitle>B &amp; C</booktitle><year>1999</year></meta>
<paper id="1"><title>A <!-- hidden --> &lt;tag&gt; &amp; <i>b</i><?pi x?>c</title></paper></volume></collection>""",
    )
    (rec,) = papers(path)
    assert rec.title == "A <tag> & bc"
    assert rec.venue == "B & C"


def test_broken_xml_reports_file_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "P99.xml",
        """<?xml version="1.0"?>
<collection id="P99">
 <volume id="1">
  <meta><booktitle>B</booktitle><year>1999</year></meta>
  <paper id="1"><title>Fine</title></paper>
  <paper id="2"><title>Bad <b>bold</title></paper>
 </volume>
</collection>
""",
    )
    items = list(iter_acl_xml(path))
    assert isinstance(items[0], PaperRecord) and items[0].title == "Fine"
    problem = items[-1]
    assert isinstance(problem, ImportProblem)
    assert problem.source == path and problem.line == 6
    assert str(problem).startswith(f"{path}:6: broken XML")
    assert "Traceback" not in str(problem)


def test_truncated_missing_and_foreign_files(tmp_path: Path) -> None:
    truncated = write(
        tmp_path, "P98.xml", "<collection id='P98'>\n<volume id='1'>\n<meta><booktitle>B</booktitle></meta>\n"
    )
    (problem,) = list(iter_acl_xml(truncated))
    assert isinstance(problem, ImportProblem) and problem.line >= 3 and "broken XML" in problem.message

    missing = str(tmp_path / "nope.xml")
    (problem,) = list(iter_acl_xml(missing))
    assert (
        isinstance(problem, ImportProblem) and problem.source == missing and "cannot read" in problem.message
    )

    foreign = write(tmp_path, "feed.xml", "<rss><channel><title>x</title></channel></rss>")
    (problem,) = list(iter_acl_xml(foreign))
    assert isinstance(problem, ImportProblem) and "not an ACL Anthology" in problem.message

    bad_id = write(
        tmp_path,
        "P97.xml",
        "<collection id='P97'><volume id='x'><meta><booktitle>B</booktitle></meta>"
        "<paper id='1'><title>T</title></paper></volume></collection>",
    )
    (problem,) = list(iter_acl_xml(bad_id))
    assert isinstance(problem, ImportProblem) and problem.line == 1 and "'x'" in problem.message


def _largest_tree(path: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(papers yielded, most elements the parsed tree held at any yield)."""
    roots: list[etree._Element] = []
    real_iterparse = etree.iterparse

    def spy(*args, **kwargs):
        for event, elem in real_iterparse(*args, **kwargs):
            if not roots:
                roots.append(elem.getroottree().getroot())
            yield event, elem

    monkeypatch.setattr(acl_xml.etree, "iterparse", spy)
    largest = count = 0
    for item in iter_acl_xml(path):
        assert isinstance(item, PaperRecord)
        count += 1
        if count % 50 == 0:
            largest = max(largest, sum(1 for _ in roots[0].iter()))
    monkeypatch.undo()
    return count, largest


def test_missing_paper_id_and_reimport(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "2020.x.xml",
        "<collection id='2020.x'><volume id='1'><meta><booktitle>B</booktitle></meta>"
        "\n<paper><title>No id</title></paper>\n<paper id='2'><title>Two</title></paper></volume></collection>",
    )
    problem, rec = list(iter_acl_xml(path))
    assert isinstance(problem, ImportProblem) and problem.line == 2 and "id" in problem.message
    assert isinstance(rec, PaperRecord) and rec.acl_id == "2020.x-1.2"

    store = Store(tmp_path / "s.sqlite")
    good = write(tmp_path, "P18.xml", OLD_STYLE)
    first = store.import_source(good, iter_acl_xml(good), fmt="acl-xml")
    again = store.import_source(good, iter_acl_xml(good), fmt="acl-xml")
    assert (first.imported, again.unchanged, again.imported, again.updated) == (3, 3, 0, 0)


def test_streaming_keeps_memory_constant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """However many papers a file holds, the parsed tree holds a bounded number of elements.

    lxml parses ahead of the events it delivers (a read buffer's worth of elements), so the
    bound is not tiny; what matters is that it does not grow with the file.
    """
    sizes = {}
    for n in (2000, 8000):
        body = "".join(
            f"<paper id='{i}'><title>Paper {i} <fixed-case>X</fixed-case></title>"
            f"<author><first>A</first><last>B{i}</last></author><abstract>Text {i}</abstract></paper>\n"
            for i in range(1, n + 1)
        )
        path = write(
            tmp_path,
            f"W{n}.xml",
            f"<collection id='W10'><volume id='1'><meta><booktitle>B</booktitle>"
            f"</meta>\n{body}</volume><volume id='2'><meta><booktitle>C</booktitle></meta>\n{body}"
            "</volume></collection>",
        )
        count, largest = _largest_tree(path, monkeypatch)
        assert count == 2 * n
        sizes[n] = largest
    assert sizes[8000] <= sizes[2000] + 100, f"the tree grows with the file: {sizes}"
    assert sizes[8000] < 5000, f"papers are not released: {sizes}"


# -- the real Anthology ---------------------------------------------------------------------------

EXPECTED_PAPERS = 61_686
EXPECTED_ABSTRACT_ELEMENTS = 23_271  # the README's figure: <abstract> elements that are not <abstract/>

_PAPER_RE = re.compile(rb"<paper\s")
_OPEN_ABSTRACT_RE = re.compile(rb"<abstract>")
_EMPTY_ABSTRACT_RE = re.compile(rb"<abstract>\s*</abstract>")


def _acl_files() -> list[Path]:
    return sorted(require(ACL_XML).glob("*.xml"))


@pytest.fixture(scope="module")
def anthology(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One pass: every file through iter_acl_xml into a store, recording what was yielded."""
    files = _acl_files()
    store = Store(tmp_path_factory.mktemp("acl") / "s.sqlite")
    yielded: list[PaperRecord] = []
    problems: list[ImportProblem] = []
    stats = ImportStats()
    start = time.perf_counter()
    for path in files:

        def tee(items):
            for item in items:
                (problems if isinstance(item, ImportProblem) else yielded).append(item)
                yield item

        stats.add(store.import_source(str(path), tee(iter_acl_xml(str(path))), fmt="acl-xml"))
    seconds = time.perf_counter() - start
    print(f"\nACL import: {len(files)} files, {len(yielded)} papers into a store in {seconds:.1f}s")
    # What a plain whole-tree parse (no iterparse, none of the importer's code) says.
    urls: dict[tuple[str, int], str] = {}
    with_abstract = 0
    for path in files:
        for paper in etree.parse(str(path)).getroot().iter("paper"):
            url = paper.findtext("url") or ""
            if url and not url.startswith("http"):
                urls[(str(path), paper.sourceline)] = url
            abstract = paper.find("abstract")
            if abstract is not None and "".join(abstract.itertext()).strip():
                with_abstract += 1
    independent = {"urls": urls, "with_abstract": with_abstract}
    return {
        "files": files,
        "store": store,
        "yielded": yielded,
        "problems": problems,
        "stats": stats,
        "independent": independent,
    }


@pytest.mark.slow
def test_real_anthology_counts(anthology: dict) -> None:
    files: list[Path] = anthology["files"]
    assert len(files) == 515
    yielded: list[PaperRecord] = anthology["yielded"]
    assert anthology["problems"] == []

    # Independent counts: raw bytes for <paper> elements, a whole-tree parse for non-empty abstracts.
    raw = [p.read_bytes() for p in files]
    paper_elements = sum(len(_PAPER_RE.findall(b)) for b in raw)
    abstract_elements = sum(len(_OPEN_ABSTRACT_RE.findall(b)) for b in raw)
    empty_abstracts = sum(len(_EMPTY_ABSTRACT_RE.findall(b)) for b in raw)
    with_text = anthology["independent"]["with_abstract"]
    assert paper_elements == EXPECTED_PAPERS
    assert abstract_elements == EXPECTED_ABSTRACT_ELEMENTS
    # 13 of those are <abstract></abstract>: no abstract at all, so 23,258 papers have one.
    assert with_text == abstract_elements - empty_abstracts == 23_258

    assert len(yielded) == EXPECTED_PAPERS
    assert sum(1 for r in yielded if r.abstract) == with_text
    assert all(r.title for r in yielded)
    assert all(r.year and 1950 < r.year < 2030 for r in yielded)
    assert len({r.acl_id for r in yielded}) == EXPECTED_PAPERS  # ids are unique


@pytest.mark.slow
def test_real_anthology_ids_match_the_anthologys_urls(anthology: dict) -> None:
    """Most papers carry their own id as ``<url>``: an independent check of both id schemes."""
    urls: dict[tuple[str, int], str] = anthology["independent"]["urls"]
    checked = 0
    for rec in anthology["yielded"]:
        url = urls.get((rec.source, rec.source_line))
        if url is not None:
            assert rec.acl_id == url, (rec.source, rec.source_line)
            checked += 1
    assert checked > 55_000
    old = [r for r in anthology["yielded"] if re.fullmatch(r"[A-Z]\d\d-\d{4}", r.acl_id)]
    new = [r for r in anthology["yielded"] if re.fullmatch(r"\d{4}\.[a-z0-9]+-[A-Za-z0-9]+\.\d+", r.acl_id)]
    assert len(old) + len(new) == EXPECTED_PAPERS and old and new


@pytest.mark.slow
def test_real_anthology_markup_is_gone(anthology: dict) -> None:
    for rec in anthology["yielded"]:
        for text in (rec.title, rec.abstract, rec.venue):
            assert "<fixed-case" not in text and "<tex-math" not in text and "  " not in text
            assert text == text.strip()
    by_id = {r.acl_id: r for r in anthology["yielded"]}
    assert by_id["P18-1001"].title == "Probabilistic FastText for Multi-Sense Word Embeddings"
    assert by_id["2020.acl-main.1"].authors[0] == "Gelderloos, Lieke"
    assert by_id["Q18-1001"].entry_type == "article"
    assert by_id["J10-1001"].venue == "Computational Linguistics" and by_id["J10-1001"].year == 2010


@pytest.mark.slow
def test_real_anthology_store_accounts_for_every_paper(anthology: dict) -> None:
    stats: ImportStats = anthology["stats"]
    assert stats.broken == 0 and stats.skipped == 0
    assert stats.imported + stats.duplicates + stats.updated + stats.unchanged == EXPECTED_PAPERS
    store: Store = anthology["store"]
    assert len(store.sources()) == 515
    assert store.count("acl_id != ''") == stats.imported


@pytest.mark.slow
def test_real_anthology_store_holds_every_paper(anthology: dict) -> None:
    store: Store = anthology["store"]
    assert store.count() == EXPECTED_PAPERS
    assert store.count("abstract != ''") == 23_258


def test_a_handle_in_the_doi_element_is_no_doi() -> None:
    """PACLIC volumes (Y00...) put hdl.handle.net links in <doi>: stored as DOIs they merged
    nothing real but made every such entry a "malformed DOI" for the citation checks."""
    recs = papers(str(require(ACL_XML / "Y00.xml")))
    assert len(recs) > 30
    assert all(r.doi == "" for r in recs), [r.doi for r in recs if r.doi][:3]
    doi_papers = [r for r in papers(str(require(ACL_XML / "D19.xml"))) if r.doi]
    assert len(doi_papers) > 100 and all(r.doi.startswith("10.18653/") for r in doi_papers)
