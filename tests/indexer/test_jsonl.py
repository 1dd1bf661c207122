"""JSON Lines importer: schema, dump dialects, per-line errors, and citations in the store."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from citewise.indexer.jsonl import abstract_from_inverted_index, iter_jsonl, normalize_ref
from citewise.indexer.records import ImportProblem, PaperRecord
from citewise.indexer.store import Store

from ..conftest import ACM_DEV, ACM_DL, require


def write_lines(tmp_path: Path, lines: list[object | str], name: str = "p.jsonl") -> str:
    path = tmp_path / name
    text = "\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines) + "\n"
    path.write_text(text, encoding="utf-8")
    return str(path)


def records(path: str) -> list[PaperRecord]:
    items = list(iter_jsonl(path))
    assert all(isinstance(i, PaperRecord) for i in items), [str(i) for i in items]
    return items  # type: ignore[return-value]


def test_full_record(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        [
            {
                "id": "smith2020",
                "title": "  Deep <i>Retrieval</i>\n",
                "abstract": "We &amp; they.",
                "authors": [
                    "Smith, Ada",
                    {"first": "Bo", "last": "Chen"},
                    {"name": "Carla Diaz"},
                    {"first": "Dan", "middle": ["E."], "last": "Fox", "suffix": "Jr."},
                ],
                "year": "2020-07-25",
                "venue": "SIGIR",
                "doi": "https://doi.org/10.1145/ABC.1",
                "arxiv": "arXiv:2004.12832v3",
                "references": ["10.1145/X.Y", "jones2019", "10.1145/x.y"],
                "keywords": ["retrieval", " ranking "],
                "type": "proceedings-article",
                "bibtex_key": "smith2020deep",
                "pages": "1--10",
                "issue": 3,
                "extra": {"note": "Best paper"},
                "ignored": {"x": 1},
            }
        ],
    )
    (rec,) = records(path)
    assert rec.key == "smith2020"
    assert rec.title == "Deep Retrieval"
    assert rec.abstract == "We & they."
    assert rec.authors == ["Smith, Ada", "Chen, Bo", "Carla Diaz", "Fox, Jr., Dan E."]
    assert rec.year == 2020 and rec.venue == "SIGIR"
    assert rec.doi == "10.1145/abc.1" and rec.arxiv == "2004.12832"
    assert rec.references == ["10.1145/x.y", "jones2019"]  # normalised, repeats dropped
    assert rec.keywords == "retrieval, ranking"
    assert rec.entry_type == "inproceedings"
    assert rec.extra == {"pages": "1--10", "number": "3", "note": "Best paper", "bibtex_key": "smith2020deep"}
    assert rec.source == path and rec.source_line == 1


def test_openalex_record(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        [
            {
                "id": "https://openalex.org/W2741809807",
                "display_name": "The state of OA",
                "publication_year": 2018,
                "doi": "https://doi.org/10.7717/peerj.4375",
                "type": "journal-article",
                "authorships": [
                    {"author": {"display_name": "Heather Piwowar"}},
                    {"author": {"display_name": "Jason Priem"}},
                ],
                "abstract_inverted_index": {
                    "Despite": [0],
                    "growing": [1],
                    "interest": [2, 5],
                    "in": [3],
                    "OA,": [4],
                },
                "referenced_works": ["https://openalex.org/W1", "https://openalex.org/W2"],
                "primary_location": {"source": {"display_name": "PeerJ"}},
                "ids": {
                    "openalex": "https://openalex.org/W2741809807",
                    "doi": "https://doi.org/10.7717/peerj.4375",
                },
            }
        ],
    )
    (rec,) = records(path)
    assert rec.key == "W2741809807" and rec.title == "The state of OA" and rec.year == 2018
    assert rec.abstract == "Despite growing interest in OA, interest"
    assert rec.authors == ["Heather Piwowar", "Jason Priem"]
    assert rec.references == ["W1", "W2"]
    assert rec.venue == "PeerJ" and rec.entry_type == "article" and rec.doi == "10.7717/peerj.4375"


def test_s2orc_record(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        [
            {
                "paper_id": 77499681,
                "title": "S2",
                "year": 2019,
                "journal": "ACL",
                "authors": [{"first": "Kyle", "middle": [], "last": "Lo", "suffix": ""}],
                "outbound_citations": ["1234", {"paperId": "abc"}, {"externalIds": {"DOI": "10.1/Z"}}],
                "externalIds": {"ArXiv": "1911.02782", "ACL": "2020.acl-main.447"},
            }
        ],
    )
    (rec,) = records(path)
    assert rec.key == "77499681" and rec.authors == ["Lo, Kyle"] and rec.venue == "ACL"
    assert rec.references == ["1234", "abc", "10.1/z"]
    assert rec.arxiv == "1911.02782" and rec.acl_id == "2020.acl-main.447"
    assert rec.entry_type == "article"  # no type given


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("article", "article"),
        ("Journal-Article", "article"),
        ("book-chapter", "incollection"),
        ("posted-content", "misc"),
        ("dissertation", "phdthesis"),
        ("something-else", "misc"),
    ],
)
def test_types(tmp_path: Path, given: str, expected: str) -> None:
    (rec,) = records(write_lines(tmp_path, [{"title": "T", "type": given}]))
    assert rec.entry_type == expected


@pytest.mark.parametrize(
    ("ref", "normal"),
    [
        ("https://doi.org/10.1145/ABC", "10.1145/abc"),
        ("doi:10.1/X", "10.1/x"),
        ("arXiv:1810.04805v2", "1810.04805"),
        ("1810.04805v1", "1810.04805"),
        ("cs/0101001", "cs/0101001"),
        ("https://openalex.org/W9", "W9"),
        ("  local-id ", "local-id"),
    ],
)
def test_normalize_ref(ref: str, normal: str) -> None:
    assert normalize_ref(ref) == normal


def test_inverted_index_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="abstract_inverted_index"):
        abstract_from_inverted_index({"word": "zero"})


def test_bad_lines_are_reported_and_the_rest_imports(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    lines = [
        json.dumps({"id": "a", "title": "Good one"}).encode(),  # 1
        b'{"id": "b", "title": ',  # 2 truncated JSON
        b"",  # 3 blank: skipped
        json.dumps(["not", "an", "object"]).encode(),  # 4
        json.dumps({"id": "c", "abstract": "no title"}).encode(),  # 5
        json.dumps({"id": "d", "title": "T", "authors": 5}).encode(),  # 6
        json.dumps({"id": "e", "title": "T", "year": "soon"}).encode(),  # 7
        json.dumps({"id": "f", "title": "T", "references": "x"}).encode(),  # 8
        b'{"id": "g", "title": "caf\xe9"}',  # 9 latin-1 byte
        json.dumps({"id": "h", "title": ["T"]}).encode(),  # 10
        json.dumps({"id": "i", "title": "Good two"}).encode(),  # 11
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    items = list(iter_jsonl(str(path)))
    good = [i for i in items if isinstance(i, PaperRecord)]
    problems = {i.line: i for i in items if isinstance(i, ImportProblem)}
    assert [g.key for g in good] == ["a", "i"] and [g.source_line for g in good] == [1, 11]
    assert sorted(problems) == [2, 4, 5, 6, 7, 8, 9, 10]
    assert all(p.source == str(path) and not p.skipped for p in problems.values())
    assert "invalid JSON" in problems[2].message
    assert "object" in problems[4].message
    assert problems[5].message == "no title"
    assert "'authors' must be a list" in problems[6].message
    assert "'year'" in problems[7].message
    assert "'references' must be a list" in problems[8].message
    assert "UTF-8" in problems[9].message
    assert "'title' must be a string" in problems[10].message
    assert str(problems[6]) == f"{path}:6: 'authors' must be a list, not int"


def test_gzip_bom_and_missing(tmp_path: Path) -> None:
    gz = tmp_path / "p.jsonl.gz"
    with gzip.open(gz, "wb") as fh:
        fh.write(b"\xef\xbb\xbf" + json.dumps({"id": "z", "title": "Zipped"}).encode() + b"\n")
    (rec,) = records(str(gz))
    assert rec.title == "Zipped"

    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"title": "A"}\n' * 100)[:-20])
    items = list(iter_jsonl(str(broken)))
    assert isinstance(items[-1], ImportProblem) and "cannot read" in items[-1].message

    (problem,) = list(iter_jsonl(str(tmp_path / "missing.jsonl")))
    assert isinstance(problem, ImportProblem) and "cannot read" in problem.message


def test_references_fill_the_citation_graph(tmp_path: Path) -> None:
    """Citations by record id, DOI and arXiv id resolve; unknown ones stay unresolved."""
    path = write_lines(
        tmp_path,
        [
            {
                "id": "a",
                "title": "Paper A about retrieval",
                "doi": "10.1/A",
                "references": ["b", "10.1/C", "arXiv:2001.00001v2", "10.9/unknown"],
            },
            {"id": "b", "title": "Paper B about ranking", "references": ["10.1/a"]},
            {"id": "c", "title": "Paper C about indexing", "doi": "https://doi.org/10.1/c"},
            {"id": "d", "title": "Paper D about embeddings", "arxiv": "2001.00001"},
        ],
    )
    store = Store(tmp_path / "s.sqlite")
    stats = store.import_source(path, iter_jsonl(path), fmt="jsonl")
    assert stats.imported == 4 and stats.broken == 0
    rows = store.conn.execute(
        "SELECT citing, cited_ref, cited FROM citations ORDER BY citing, cited_ref"
    ).fetchall()
    assert len(rows) == 5 and all(cited is None for _, _, cited in rows)
    store.resolve_citations()
    ids = {p.key: p.id for p in store.iter_papers()}
    graph = store.cited_by([ids["a"], ids["b"]])
    assert sorted(graph[ids["a"]]) == sorted([ids["b"], ids["c"], ids["d"]])
    assert graph[ids["b"]] == [ids["a"]]
    unresolved = store.conn.execute("SELECT cited_ref FROM citations WHERE cited IS NULL").fetchall()
    assert unresolved == [("10.9/unknown",)]

    # A later source that provides the missing paper: resolving again links it.
    later = write_lines(
        tmp_path, [{"id": "u", "title": "The unknown paper", "doi": "10.9/UNKNOWN"}], "later.jsonl"
    )
    store.import_source(later, iter_jsonl(later), fmt="jsonl")
    store.resolve_citations()
    assert store.conn.execute("SELECT count(*) FROM citations WHERE cited IS NULL").fetchone()[0] == 0


# -- real data: the ACM-CR citing papers and the papers they cite ---------------------------------

_REF_RE = re.compile(r"<reference id=\"[^\"]*\">([^<]+)</reference>")
_TAG_RE = re.compile(r"<(doi|title|abstract)>(.*?)</\1>", re.S)


def _norm(ref: str) -> str:
    """README protocol: DOIs compare case-insensitively, without the whitespace a few carry."""
    ref = ref.strip()
    return re.sub(r"\s+", "", ref).lower() if ref.lower().startswith("10.") else ref


@pytest.mark.slow
def test_real_citation_graph_from_acm_cr(tmp_path: Path) -> None:
    """The 30 ACM-CR dev papers as JSONL, citing papers of the ACM DL BibTeX collection.

    The cited papers are cut out of the collection's .bib files by plain text search, imported
    with the BibTeX importer, and every (citing, cited DOI) pair found in them must resolve.
    """
    require(ACM_DEV)
    require(ACM_DL)
    bibtex = pytest.importorskip("citewise.indexer.bibtex")

    lines = []
    cited: set[str] = set()
    for xml in sorted(ACM_DEV.glob("*/*.xml")):
        text = xml.read_text(encoding="utf-8")
        fields = {m.group(1): m.group(2).strip() for m in _TAG_RE.finditer(text.split("<contexts>")[0])}
        refs = [r.strip() for r in _REF_RE.findall(text)]
        cited.update(_norm(r) for r in refs)
        lines.append(
            {
                "id": fields["doi"],
                "doi": fields["doi"],
                "title": fields["title"],
                "abstract": fields.get("abstract", ""),
                "references": refs,
                "type": "inproceedings",
            }
        )
    assert len(lines) == 30
    jsonl = write_lines(tmp_path, lines, "dev.jsonl")

    # Cut the entries of cited papers out of the collection (ACM keys entries by DOI).
    entries: dict[str, str] = {}
    for bib in sorted(ACM_DL.rglob("*.bib")):
        text = bib.read_text(encoding="utf-8", errors="replace")
        for chunk in re.split(r"\n(?=@)", text):
            m = re.match(r"@\w+\{([^,\s]+),", chunk.strip())
            if m and m.group(1).lower() in cited and m.group(1).lower() not in entries:
                entries[m.group(1).lower()] = chunk.strip()
    assert len(entries) > 100
    bibfile = tmp_path / "cited.bib"
    bibfile.write_text("\n\n".join(entries.values()) + "\n", encoding="utf-8")

    store = Store(tmp_path / "s.sqlite")
    store.import_source(str(bibfile), bibtex.iter_bibtex(str(bibfile)), fmt="bibtex")
    stats = store.import_source(jsonl, iter_jsonl(jsonl), fmt="jsonl")
    assert stats.broken == 0 and stats.imported + stats.duplicates + stats.unchanged + stats.updated == 30

    expected_pairs = sum(
        1 for line in lines for ref in {_norm(r) for r in line["references"]} if ref in entries
    )
    total_refs = sum(len({_norm(r) for r in line["references"]}) for line in lines)
    citing = [store.find(doi=line["doi"]) for line in lines]
    citing_ids = [p.id for p in citing if p is not None]
    assert len(set(citing_ids)) == 30
    n_rows = store.conn.execute(
        f"SELECT count(*) FROM citations WHERE citing IN ({','.join('?' * 30)})", citing_ids
    ).fetchone()[0]
    assert n_rows == total_refs
    store.resolve_citations()
    resolved = sum(len(v) for v in store.cited_by(citing_ids).values())
    print(f"\nACM-CR: {len(entries)} cited entries, {total_refs} references, {resolved} resolved")
    assert resolved == expected_pairs > 400
