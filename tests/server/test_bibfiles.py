"""Bibliography resolution on a temporary tree, and the .bib key scanner."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from citewise.server.bibfiles import BibFile, bib_keys, read_bib_keys, resolve_bibliography


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """ws/ (workspace root) with paper/main.tex, bibs in several places and a BIBINPUTS tree."""
    ws = tmp_path / "ws"
    (ws / "paper").mkdir(parents=True)
    (ws / "paper" / "main.tex").write_text("")
    (ws / "paper" / "local.bib").write_text("")
    (ws / "paper" / "sub").mkdir()
    (ws / "paper" / "sub" / "nested.bib").write_text("")
    (ws / "root.bib").write_text("")
    (ws / "both.bib").write_text("")
    (ws / "paper" / "both.bib").write_text("")
    texmf = tmp_path / "texmf"
    (texmf / "bibtex" / "deep" / "er").mkdir(parents=True)
    (texmf / "bibtex" / "deep" / "er" / "global.bib").write_text("")
    (texmf / "flat.bib").write_text("")
    (tmp_path / "abs.bib").write_text("")
    (tmp_path / "setting.bib").write_text("")
    return tmp_path


def resolve(
    tree: Path,
    names: list[str],
    settings: list[str] | None = None,
    bibinputs: str | None = None,
    root: bool = True,
) -> list[BibFile]:
    env = {} if bibinputs is None else {"BIBINPUTS": bibinputs}
    return resolve_bibliography(
        tree / "ws" / "paper" / "main.tex",
        names,
        settings or [],
        env=env,
        workspace_root=tree / "ws" if root else None,
    )


def rel(tree: Path, bibs: list[BibFile]) -> list[tuple[str, str, bool]]:
    out = []
    for b in bibs:
        try:
            shown = b.path.relative_to(tree).as_posix()
        except ValueError:
            shown = b.path.as_posix()
        out.append((shown, b.origin, b.exists))
    return out


CASES: list[tuple[list[str], list[str], str | None, list[tuple[str, str, bool]]]] = [
    (["local.bib"], [], None, [("ws/paper/local.bib", "document", True)]),
    (["local"], [], None, [("ws/paper/local.bib", "document", True)]),
    (["sub/nested.bib"], [], None, [("ws/paper/sub/nested.bib", "document", True)]),
    (["./local.bib"], [], None, [("ws/paper/local.bib", "document", True)]),
    (["root.bib"], [], None, [("ws/root.bib", "workspace", True)]),
    (["../root.bib"], [], None, [("ws/root.bib", "document", True)]),
    (["both.bib"], [], None, [("ws/paper/both.bib", "document", True)]),  # document folder first
    (
        ["local.bib", "root.bib"],
        [],
        None,
        [("ws/paper/local.bib", "document", True), ("ws/root.bib", "workspace", True)],
    ),
    (["local.bib", "local"], [], None, [("ws/paper/local.bib", "document", True)]),  # duplicates collapse
    (["missing.bib"], [], None, [("ws/paper/missing.bib", "missing", False)]),
    (["missing"], [], None, [("ws/paper/missing.bib", "missing", False)]),
    (["missing.bib"], ["setting.bib"], None, [("ws/paper/missing.bib", "missing", False)]),
    ([], [], None, [("ws/paper/references.bib", "default", False)]),
    (["", "  "], [], None, [("ws/paper/references.bib", "default", False)]),
    ([], ["../setting.bib"], None, [("setting.bib", "setting", True)]),
    ([], ["nope.bib"], None, [("ws/nope.bib", "setting", False)]),
    ([], ["", "../setting.bib"], None, [("setting.bib", "setting", True)]),
    (["global.bib"], [], "{texmf}/bibtex//", [("texmf/bibtex/deep/er/global.bib", "bibinputs", True)]),
    (["global.bib"], [], "{texmf}/bibtex", [("ws/paper/global.bib", "missing", False)]),  # not recursive
    (["flat"], [], "{texmf}", [("texmf/flat.bib", "bibinputs", True)]),
    (["flat.bib"], [], "{sep}{texmf}{sep}", [("texmf/flat.bib", "bibinputs", True)]),  # empty = default
    (["flat.bib"], [], "/does/not/exist{sep}{texmf}", [("texmf/flat.bib", "bibinputs", True)]),
    (["local.bib"], [], "{texmf}//", [("ws/paper/local.bib", "document", True)]),  # document beats BIBINPUTS
    (["../../texmf/flat.bib"], [], None, [("texmf/flat.bib", "document", True)]),
]


@pytest.mark.parametrize(("names", "settings", "bibinputs", "expected"), CASES)
def test_resolve_bibliography(
    tree: Path,
    names: list[str],
    settings: list[str],
    bibinputs: str | None,
    expected: list[tuple[str, str, bool]],
) -> None:
    if bibinputs is not None:
        bibinputs = bibinputs.format(texmf=tree / "texmf", sep=os.pathsep)
    assert rel(tree, resolve(tree, names, settings, bibinputs)) == expected


def test_absolute_names(tree: Path) -> None:
    bibs = resolve(tree, [str(tree / "abs.bib"), str(tree / "abs"), str(tree / "gone.bib")])
    assert rel(tree, bibs) == [("abs.bib", "absolute", True), ("gone.bib", "missing", False)]


def test_relative_setting_without_workspace_uses_document_folder(tree: Path) -> None:
    bibs = resolve(tree, [], ["local.bib"], root=False)
    assert rel(tree, bibs) == [("ws/paper/local.bib", "setting", True)]


def test_no_workspace_root_skips_that_step(tree: Path) -> None:
    assert rel(tree, resolve(tree, ["root.bib"], root=False)) == [("ws/paper/root.bib", "missing", False)]


def test_setting_with_home_and_env_vars(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tree))
    monkeypatch.setenv("CW_BIBDIR", str(tree))
    bibs = resolve(tree, [], ["~/setting.bib", "$CW_BIBDIR/abs.bib"])
    assert rel(tree, bibs) == [("setting.bib", "setting", True), ("abs.bib", "setting", True)]


def test_relative_bibinputs_is_relative_to_document(tree: Path) -> None:
    assert rel(tree, resolve(tree, ["nested.bib"], bibinputs="sub")) == [
        ("ws/paper/sub/nested.bib", "bibinputs", True)
    ]


def test_to_create_flag(tree: Path) -> None:
    (bib,) = resolve(tree, [])
    assert bib.to_create and bib.name == ""
    (bib,) = resolve(tree, ["local.bib"])
    assert not bib.to_create and bib.name == "local.bib"


def test_default_env_is_os_environ(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIBINPUTS", str(tree / "texmf"))
    (bib,) = resolve_bibliography(tree / "ws" / "paper" / "main.tex", ["flat.bib"])
    assert bib.origin == "bibinputs"


# --------------------------------------------------------------------------------------------
# bib_keys
# --------------------------------------------------------------------------------------------

BIB_TEXT = """% a comment mentioning @article{fake,
@string{acm = "ACM"}
@preamble{"\\newcommand{\\x}{}"}
@comment{jabref-meta: databaseType:bibtex;}

@article{smith2020Deep,
  title = {Deep},
  author = {Smith, A. and me@example.com},
}
@InProceedings{ doe:2019:abc ,
  title = {X}}
@misc(Smith_2020,
  note = {x})
@book{10.1145/3331184.3331211,
}
@article{
  multiline,
  title={y}}
@article{smith2020Deep,
  title = {duplicate}
}
@online{müller2021, url = {u}}
@article{broken title = {no key}}
"""


def test_bib_keys() -> None:
    keys = bib_keys(BIB_TEXT)
    assert keys == {
        "smith2020Deep": 5,
        "doe:2019:abc": 9,
        "Smith_2020": 11,
        "10.1145/3331184.3331211": 13,
        "multiline": 15,
        "müller2021": 21,
    }
    lines = BIB_TEXT.split("\n")
    for line in keys.values():
        assert lines[line].lstrip().startswith("@")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("@article{a,}", {"a": 0}),
        ("@article{a,}@article{b,}", {"a": 0, "b": 0}),
        ("\n\n@article {a ,", {"a": 2}),
        ("@article{a}", {}),
        ("@string{a,}", {}),
        ("@Comment{a,}", {}),
        ("@{a,}", {}),
        ("email me@example.com, please", {}),
        ("@article{a,\r\n}\r\n@book{b,}", {"a": 0, "b": 2}),
        ("% @article{hidden,\n@article{shown,", {"shown": 1}),
        ("  %% @article{hidden,", {}),
    ],
)
def test_bib_keys_table(text: str, expected: dict[str, int]) -> None:
    assert bib_keys(text) == expected


def test_read_bib_keys(tmp_path: Path) -> None:
    p = tmp_path / "r.bib"
    p.write_text("@article{a,\n}\n", encoding="utf-8")
    assert read_bib_keys(p) == {"a": 0}
    assert read_bib_keys(tmp_path / "missing.bib") == {}


def test_bib_keys_is_fast_on_large_files() -> None:
    big = "".join(f"@article{{key{i},\n  title = {{T {i}}},\n  year = 2020,\n}}\n\n" for i in range(20000))
    keys = bib_keys(big)
    assert len(keys) == 20000 and keys["key19999"] == 19999 * 5
