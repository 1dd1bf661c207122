"""The ``citewise`` command end to end on small files: index, info, search, errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from citewise.cli import main

LIB = r"""
@inproceedings{vaswani2017attention,
  title = {Attention Is All You Need},
  author = {Vaswani, Ashish and Shazeer, Noam and Parmar, Niki},
  booktitle = {Advances in Neural Information Processing Systems},
  year = {2017},
  abstract = {A sequence transduction model based solely on attention mechanisms, dispensing with recurrence.}
}
@article{robertson2009bm25,
  title = {The Probabilistic Relevance Framework: {BM25} and Beyond},
  author = {Robertson, Stephen and Zaragoza, Hugo},
  journal = {Foundations and Trends in Information Retrieval},
  year = {2009},
  doi = {10.1561/1500000019},
  abstract = {The probabilistic relevance framework behind BM25 term weighting for document retrieval.}
}
@article{broken, title = {Unclosed
"""


@pytest.fixture()
def lib(tmp_path: Path) -> Path:
    path = tmp_path / "lib.bib"
    path.write_text(LIB, encoding="utf-8")
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "citewise.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_index_info_search(tmp_path: Path, lib: Path, capsys) -> None:
    store = str(tmp_path / "s.sqlite")
    assert main(["index", str(lib), "--store", store, "--json", "-q"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert (summary["imported"], summary["broken"]) == (2, 1)
    assert f"{lib}:17" in err and "broken entry" in err
    assert main(["info", "--store", store, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["papers"] == 2 and info["with_abstract"] == 2
    assert (
        main(["search", "probabilistic term weighting for retrieval", "--store", store, "--json", "-k", "5"])
        == 0
    )
    results = json.loads(capsys.readouterr().out)
    assert results[0]["key"] == "robertson2009bm25"
    assert results[0]["doi"] == "10.1561/1500000019"
    assert set(results[0]) >= {"key", "doi", "title", "year", "score"}
    # Author names find papers too (not only words of the title and abstract).
    assert main(["search", "Vaswani", "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["key"] == "vaswani2017attention"
    assert main(["search", "attention", "--store", store]) == 0
    assert "Attention Is All You Need (2017)" in capsys.readouterr().out


def test_index_embeds_only_when_the_ranking_uses_embeddings(
    tmp_path: Path, lib: Path, capsys, monkeypatch
) -> None:
    """The default dense model (static, issue 26) embeds every store, ``--no-embed`` skips it; the
    bi-encoder (``CITEWISE_DENSE_MODEL=dense``) does not embed by default: ``--embed`` opts in, and a
    store that has embeddings keeps them up to date by default."""
    from citewise.models import dense_index

    manifest = json.loads((dense_index.default_model_dir() / "manifest.json").read_text())
    assert manifest["kind"] == "attention-bag" and manifest["embed_by_default"]
    default = tmp_path / "d.sqlite"
    assert main(["index", str(lib), "--store", str(default), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["embedding"]["valid"] == 2
    assert main(["index", str(lib), "--store", str(tmp_path / "n.sqlite"), "--json", "-q", "--no-embed"]) == 0
    assert "embedding" not in json.loads(capsys.readouterr().out)

    monkeypatch.setenv("CITEWISE_DENSE_MODEL", "dense")
    store = tmp_path / "s.sqlite"
    dense = tmp_path / "s.sqlite.dense"
    assert main(["index", str(lib), "--store", str(store), "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["imported"] == 2 and "embedding" not in summary and not dense.exists()
    assert main(["index", "--store", str(store), "--json", "-q", "--embed"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["embedding"]["valid"] == 2 and (dense / "meta.json").is_file()
    more = tmp_path / "more.bib"
    more.write_text(
        "@article{c, title={Dense Passage Retrieval}, year={2020}, doi={10.9/c}}\n", encoding="utf-8"
    )
    assert main(["index", str(more), "--store", str(store), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["embedding"]["valid"] == 3
    assert main(["index", str(more), "--store", str(store), "--json", "-q", "--no-embed"]) == 0
    assert "embedding" not in json.loads(capsys.readouterr().out)


def test_index_embeds_a_store_that_knows_citations_only_where_it_gets_its_cited_as_list(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """Where the store knows how its papers are cited, the dense paper list answers the sentences
    its ``cited-as`` list steps aside for, so ``citewise index`` embeds it as any store; but a
    store citing more papers than that list holds is ranked by BM25 over the citing texts alone,
    so its papers are not embedded (an hour at ten million papers); ``--embed`` still does."""
    from citewise.models import citation_prior

    papers = tmp_path / "papers.jsonl"
    rows = [{"id": f"p{i}", "title": f"Paper {i} on tagging and parsing", "year": 2000 + i} for i in range(6)]
    papers.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    edges = tmp_path / "edges.tsv"
    edges.write_text("citing\tcited\tcontext\np1\tp0\tWe tag with a Markov model.\n", encoding="utf-8")
    store = tmp_path / "c.sqlite"
    assert main(["index", str(papers), str(edges), "--store", str(store), "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["embedding"]["valid"] == 6 and summary["citing_embedding"]["papers"] == 1
    monkeypatch.setattr(citation_prior, "MAX_CITED_AS", 0)
    big = tmp_path / "big.sqlite"
    assert main(["index", str(papers), str(edges), "--store", str(big), "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert "embedding" not in summary and not (tmp_path / "big.sqlite.dense").exists()
    assert "skipped" in summary["citing_embedding"]
    assert main(["info", "--store", str(big), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["models"]["dense"]["index"].startswith("not used")
    assert main(["index", "--store", str(big), "--json", "-q", "--embed"]) == 0
    assert json.loads(capsys.readouterr().out)["embedding"]["valid"] == 6


def test_server_reindex_embeds_by_the_same_rule(tmp_path: Path, lib: Path, monkeypatch) -> None:
    """The language server's import/reindex job (``jobs.refresh``) follows the rule of ``index``:
    the default model embeds under ``auto``; the bi-encoder only when the configured prefetch
    (``hybrid``) would read its embeddings."""
    from citewise.indexer.store import Store
    from citewise.server.jobs import refresh

    store = Store(tmp_path / "d.sqlite")
    assert refresh(store, [str(lib)], prefetch="auto").imported == 2
    assert (tmp_path / "d.sqlite.dense" / "meta.json").is_file()
    store.close()
    monkeypatch.setenv("CITEWISE_DENSE_MODEL", "dense")
    store = Store(tmp_path / "s.sqlite")
    dense = tmp_path / "s.sqlite.dense"
    assert refresh(store, [str(lib)], prefetch="auto").imported == 2
    assert not dense.exists()
    assert refresh(store, [str(lib)], rebuild=True, prefetch="hybrid").recommender is not None
    assert (dense / "meta.json").is_file()
    store.close()


def test_reindex_is_idempotent(tmp_path: Path, lib: Path, capsys) -> None:
    store = str(tmp_path / "s.sqlite")
    main(["index", str(lib), "--store", store, "--json", "-q"])
    capsys.readouterr()
    main(["index", str(lib), "--store", store, "--json", "-q"])
    again = json.loads(capsys.readouterr().out)
    assert (again["imported"], again["updated"], again["unchanged"]) == (0, 0, 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["index", "/no/such/file.bib"], "no such file"),
        (["search", "x", "--store", "/no/such/store.sqlite"], "no paper store"),
        (["info", "--store", "/no/such/store.sqlite"], "no paper store"),
        (["eval", "acm-cr", "--papers", "/nope"], "--papers /nope: no such file"),
    ],
)
def test_user_errors_are_one_clear_line(tmp_path: Path, args: list[str], message: str) -> None:
    if args[0] == "index":
        args = [*args, "--store", str(tmp_path / "s.sqlite")]
    proc = run(*args)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_format_is_reported(tmp_path: Path) -> None:
    odd = tmp_path / "notes.txt"
    odd.write_text("hello")
    proc = run("index", str(odd), "--store", str(tmp_path / "s.sqlite"))
    assert proc.returncode == 1 and "unknown format" in proc.stderr and "Traceback" not in proc.stderr


def test_index_without_a_terminal_prints_one_plain_line_per_phase(tmp_path: Path) -> None:
    """stderr to a pipe (a script, a CI log): each phase says when it starts (with its size) and
    when it is done, in plain lines, never a bar's carriage returns; ``-q`` says nothing. A real
    ACM-CR venue file: imported, BM25-indexed and embedded (the lines every ~10 s are the
    reporter's own test, on a fake clock: tests/cli/test_progress.py)."""
    from tests.conftest import ACM_DL, require

    bib = require(ACM_DL / "wims" / "wims-2015.bib")
    proc = run("index", str(bib), "--store", str(tmp_path / "s.sqlite"))
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("citewise: ")]
    assert "\r" not in proc.stderr
    papers = json.loads(run("info", "--store", str(tmp_path / "s.sqlite"), "--json").stdout)["papers"]
    for label, started in (
        ("importing", f"started of {bib.stat().st_size / 1024:.1f} KB"),
        ("search index", f"started of {papers:,} papers"),
        ("embedding papers", f"started of {papers:,} papers"),
    ):
        mine = [
            line.removeprefix(f"citewise: {label}: ")
            for line in lines
            if line.startswith(f"citewise: {label}: ")
        ]
        assert mine[0] == started, lines
        assert mine[-1].startswith(f"done, {papers:,} papers" if label != "importing" else "done, "), lines
    quiet = run("index", str(bib), "--store", str(tmp_path / "q.sqlite"), "-q")
    assert quiet.returncode == 0, quiet.stderr
    phases = ("importing", "search index", "embedding", "nearest-neighbour")
    assert not [
        line for line in quiet.stderr.splitlines() if line.startswith(tuple(f"citewise: {p}" for p in phases))
    ]


def test_a_dense_prefetch_without_a_dense_index_is_one_notice(tmp_path: Path, lib: Path, capsys) -> None:
    """``search --prefetch dense`` on a store with no dense index says so once and ranks with BM25
    (it used to end in a traceback); ``eval`` refuses the same case, through the same decision."""
    from citewise.indexer.store import Store
    from citewise.models.prefetch_choice import DenseIndexMissing, choose_prefetch
    from citewise.models.recommender import Recommender

    store = str(tmp_path / "s.sqlite")
    assert main(["index", str(lib), "--store", store, "--no-embed", "-q"]) == 0
    capsys.readouterr()
    query = ["search", "probabilistic term weighting", "--store", store, "--json"]
    assert main([*query, "--prefetch", "dense"]) == 0
    out, err = capsys.readouterr()
    assert [line for line in err.splitlines() if line.strip()] == [
        f"citewise: prefetch 'dense' needs a dense index for the store {store}, which it does not have; "
        "using BM25. Run `citewise index --embed` (a dense model installed)."
    ]
    assert main(query) == 0
    assert json.loads(out) == json.loads(capsys.readouterr().out)
    rec = Recommender(Store(store), prefetch_mode="hybrid")
    assert choose_prefetch("bm25", rec, store).required() == "bm25"
    with pytest.raises(DenseIndexMissing, match="needs a dense index"):
        choose_prefetch("hybrid", rec, store).required()
