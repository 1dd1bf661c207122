"""The names the dense model had before issue 24 still work for one release, each with one notice.

``hatten`` was the prefetch mode, ``CITEWISE_HATTEN_MODEL`` the environment variable and
``<store>.hatten/`` the index folder of what is a MiniLM bi-encoder (``dense`` now). A user's
scripts, shell profile and embedded stores must keep working (the folder holds up to half an hour
of embedding), and the user is told once per process what to change. The server setting is tested
through a real server in ``tests/lsp/test_lsp_settings.py``; a manifest without ``kind`` (once served
as HAtten by default) in ``tests/faults/test_faults.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewise import deprecated
from citewise.cli import build_parser, main
from citewise.indexer.ann import index_folder
from citewise.indexer.store import Store
from citewise.models import dense_index

LIB = (
    "@article{dpr, title={Dense Passage Retrieval for Open-Domain Question Answering}, year={2020},"
    " abstract={Dual encoders of questions and passages trained with in-batch negatives.}, doi={10.9/dpr}}\n"
    "@article{bm25, title={The Probabilistic Relevance Framework: BM25 and Beyond}, year={2009},"
    " abstract={Term weighting for document retrieval.}, doi={10.9/bm25}}\n"
    "@article{glove, title={GloVe: Global Vectors for Word Representation}, year={2014},"
    " abstract={Word vectors from global co-occurrence counts.}, doi={10.9/glove}}\n"
)


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process would: no notice given yet, neither variable set."""
    monkeypatch.setattr(deprecated, "_told", set())
    monkeypatch.delenv("CITEWISE_DENSE_MODEL", raising=False)
    monkeypatch.delenv("CITEWISE_HATTEN_MODEL", raising=False)


@pytest.fixture()
def embedded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A store indexed with ``--embed`` by the shipped dense model (its index in ``<store>.dense/``)."""
    if not (dense_index.default_model_dir() / "manifest.json").exists():
        pytest.skip("no dense model installed")
    bib = tmp_path / "lib.bib"
    bib.write_text(LIB, encoding="utf-8")
    store = tmp_path / "s.sqlite"
    assert main(["index", str(bib), "--store", str(store), "--json", "-q", "--embed"]) == 0
    assert json.loads(capsys.readouterr().out)["embedding"]["valid"] == 3
    assert (tmp_path / "s.sqlite.dense" / "meta.json").is_file()
    return store


def _notices(err: str, word: str) -> list[str]:
    return [line for line in err.splitlines() if word in line]


def test_prefetch_hatten_on_the_command_line_is_dense_with_one_notice(
    embedded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["search", "vectors of words from co-occurrence", "--store", str(embedded), "--json"]
    assert main([*args, "--prefetch", "dense"]) == 0
    dense, err = capsys.readouterr()
    assert not _notices(err, "deprecated"), err
    for _ in range(2):
        assert main([*args, "--prefetch", "hatten"]) == 0
    out, err = capsys.readouterr()
    assert out == dense + dense, "hatten ranks exactly as dense"
    assert _notices(err, "deprecated") == [
        "citewise: --prefetch hatten is deprecated, use --prefetch dense instead "
        "(the old name still works in this release)"
    ]
    assert build_parser().parse_args(["eval", "acm-cr", "--prefetch", "hatten"]).prefetch == "dense"


def test_prefetch_choices_name_dense_not_hatten(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "x", "--prefetch", "nope"])
    err = capsys.readouterr().err
    assert "--prefetch {auto,bm25,dense,hybrid}" in err and "invalid choice: 'nope'" in err


def test_old_environment_variable_still_chooses_the_model_with_one_notice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = Path(dense_index.__file__).parent / "static"
    if not (shipped / "manifest.json").exists():
        pytest.skip("no shipped static model in models/static")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CITEWISE_HATTEN_MODEL", "static")
    assert dense_index.default_model_dir() == shipped
    assert dense_index.default_model_dir() == shipped
    notice = (
        "citewise: CITEWISE_HATTEN_MODEL is deprecated, use CITEWISE_DENSE_MODEL instead "
        "(the old name still works in this release)"
    )
    assert _notices(capsys.readouterr().err, "deprecated") == [notice]
    # The new name wins when both are set; the old one is still pointed out (it goes next release).
    monkeypatch.setattr(deprecated, "_told", set())
    monkeypatch.setenv("CITEWISE_DENSE_MODEL", "dense")
    assert dense_index.default_model_dir() == shipped.parent / "dense"
    assert _notices(capsys.readouterr().err, "deprecated") == [notice]
    monkeypatch.delenv("CITEWISE_HATTEN_MODEL")
    assert dense_index.default_model_dir() == shipped.parent / "dense"
    assert not capsys.readouterr().err


def test_an_old_index_folder_is_renamed_to_dense_and_used(
    embedded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store embedded by an older citewise has ``<store>.hatten/``: it is renamed on first open
    (no re-embedding), with one notice, and serves as before."""
    new = embedded.with_name(embedded.name + ".dense")
    old = embedded.with_name(embedded.name + ".hatten")
    args = ["search", "vectors of words from co-occurrence", "--store", str(embedded), "--json"]
    assert main([*args, "--prefetch", "dense"]) == 0
    before = capsys.readouterr().out
    new.rename(old)
    assert main(["info", "--store", str(embedded), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["models"]["dense"]["index"] == "up to date", out
    assert new.is_dir() and not old.exists()
    assert _notices(err, "renamed") == [
        f"citewise: renamed the dense index folder {old} to {new.name} (its old name; the embeddings are kept)"
    ]
    assert main([*args, "--prefetch", "dense"]) == 0
    out, err = capsys.readouterr()
    assert out == before and not err


def test_an_old_index_folder_that_cannot_be_renamed_is_used_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store(tmp_path / "s.sqlite")
    old = tmp_path / "s.sqlite.hatten"
    old.mkdir()

    def refuse(self: Path, target: Path) -> Path:
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as patch:
        patch.setattr(Path, "rename", refuse)
        assert index_folder(store) == old
        assert index_folder(store) == old
    err = capsys.readouterr().err
    assert _notices(err, "old name") == [
        f"citewise: using the dense index folder {old} under its old name: renaming it to "
        "s.sqlite.dense failed (Permission denied); rename it by hand, the next release reads only s.sqlite.dense"
    ]
    (tmp_path / "s.sqlite.dense").mkdir()  # both: the new one is used, the old one left alone
    assert index_folder(store) == tmp_path / "s.sqlite.dense" and old.is_dir()
    store.close()


def test_a_store_without_any_index_folder_gets_none_made(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    assert index_folder(store) == tmp_path / "s.sqlite.dense"
    assert not (tmp_path / "s.sqlite.dense").exists() and not (tmp_path / "s.sqlite.hatten").exists()
    store.close()
