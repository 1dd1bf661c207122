"""Completion wherever texlab completes (issue 24, item 4): texlab's own citation-completion test
cases, run end to end through the real server as a new user would meet them.

The fixtures are written as texlab writes its tests (``crates/completion/src/tests.rs`` and its
earlier citation tests): ``%! name`` starts a file, a line of only ``|`` and ``^`` marks the
line above it (``|`` the cursor, ``^^^`` the range the completion must replace; no ``^``: an
empty range at the cursor). Every case runs twice: on an empty store (the ``.bib`` beside the
draft is all there is) and on a new user's store (the example library, with the workspace's
``.bib`` files imported at start, as ``importWorkspaceBibs`` does by default).

Where citewise differs from texlab on purpose the case says why in ``note`` and asserts what
citewise does (docs/language-server.md, "Where completion happens"): a key already cited in the
same command is not offered again, and a "key" with a space in it is not a BibTeX key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from ..lsp_harness import Session, build_store, start, stop

pytestmark = pytest.mark.asyncio(loop_scope="module")

_MARKER_LINE = re.compile(r"[ ^|]*[\^|][ ^|]*")


@dataclass
class Fixture:
    """A parsed texlab-style fixture: the files, and where the cursor and the expected range are."""

    files: dict[str, str]
    main: str = ""  # the file holding the cursor
    cursor: tuple[int, int] = (0, 0)  # (line, column) in ``main``
    span: tuple[int, int, int] | None = None  # (line, start column, end column) of the ``^`` run

    @property
    def expected_range(self) -> types.Range:
        line, start, end = self.span if self.span else (*self.cursor, self.cursor[1])
        return types.Range(types.Position(line, start), types.Position(line, end))


def parse_fixture(src: str) -> Fixture:
    """texlab's ``Fixture::parse``: files split at ``%!``, marker lines point at the line above."""
    fixture = Fixture({})
    for chunk in src.split("%! ")[1:]:
        name, _, body = chunk.partition("\n")
        lines: list[str] = []
        for line in body.splitlines():
            line = line.rstrip()
            if not _MARKER_LINE.fullmatch(line):
                lines.append(line)
                continue
            if "|" in line:
                fixture.main, fixture.cursor = name.strip(), (len(lines) - 1, line.index("|"))
            if "^" in line:
                fixture.span = (len(lines) - 1, line.index("^"), line.rindex("^") + 1)
        fixture.files[name.strip()] = "\n".join(lines).strip("\n") + "\n"
    assert fixture.main, "a fixture needs a | cursor"
    return fixture


async def test_the_fixture_parser_reads_texlab_markers() -> None:
    fx = parse_fixture("%! main.tex\n\\cite{foo,f\n          |\n          ^\n\n%! main.bib\n@article{foo,}")
    assert fx.files == {"main.tex": "\\cite{foo,f\n", "main.bib": "@article{foo,}\n"}
    assert fx.main == "main.tex" and fx.cursor == (0, 10) and fx.span == (0, 10, 11)
    assert fx.expected_range == types.Range(types.Position(0, 10), types.Position(0, 11))


@dataclass
class Case:
    """One texlab test: its name (and where texlab has it), the fixture, the keys citewise offers."""

    name: str
    source: str
    fixture: str
    keys: set[str]
    note: str = ""  # why citewise differs from texlab's expectation, where it does
    ordered: list[str] = field(default_factory=list)  # keys that must lead, in this order

    def parsed(self) -> Fixture:
        return parse_fixture(self.fixture)


HEAD = "texlab crates/completion/src/tests.rs"
OLD = "texlab src/features/completion/citation.rs (2020-2022)"
OLDER = "texlab src/completion/latex/citation.rs (2020)"
SAME_COMMAND = "citewise does not offer a key already cited in the same command (texlab does)"

TEXLAB_CASES: list[Case] = [
    Case(
        "citation",
        HEAD,
        r"""
%! main.tex
\documentclass{article}
\bibliography{main}
\begin{document}
\cite{
      |
\end{document}

%! main.bib
@article{foo:2019,
    author = {Foo Bar},
    title = {Baz Qux},
    year = {2019},
}

@article{bar:2005,}""",
        {"foo:2019", "bar:2005"},
    ),
    Case(
        "citation_open_brace",
        HEAD,
        r"""
%! main.tex
\addbibresource{main.bib}
\cite{
      |

%! main.bib
@article{foo,}""",
        {"foo"},
    ),
    Case(
        "citation_open_brace_multiple",
        HEAD,
        r"""
%! main.tex
\addbibresource{main.bib}
\cite{foo,f
          |
          ^

%! main.bib
@article{foo,}""",
        set(),
        SAME_COMMAND,
    ),
    Case(
        "citation_acronym",
        HEAD,
        r"""
%! main.tex
\addbibresource{main.bib}
\DeclareAcronym{foo}{cite={}}
                           |

%! main.bib
@article{foo,}""",
        {"foo"},
    ),
    Case(
        "citation_after_brace",
        HEAD,
        r"""
%! main.tex
\documentclass{article}
\bibliography{main}
\begin{document}
\cite{}
       |
\end{document}

%! main.bib
@article{foo,}""",
        set(),
    ),
    Case(
        "test_latex_simple",
        OLD,
        r"""
%! main.tex
\addbibresource{main.bib}
\cite{}
      |

%! main.bib
@article{foo,}""",
        {"foo"},
    ),
    Case(
        "test_latex_two_words",
        OLD,
        r"""
%! main.tex
\addbibresource{main.bib}
\cite{foo}
      |
      ^^^

%! main.bib
@article{foo bar,}""",
        set(),
        "'foo bar' is not a BibTeX key (BibTeX and biber stop at the space): no entry to offer",
    ),
    Case(
        "test_latex_open_brace",
        OLD,
        r"""
%! main.tex
\addbibresource{main.bib}
\cite{
      |

%! main.bib
@article{foo,}""",
        {"foo"},
    ),
    Case(
        "test_latex_open_brace_second",
        OLD,
        r"""
%! main.tex
\addbibresource{main.bib}
\cite{foo,a
          |
          ^

%! main.bib
@article{foo,}""",
        set(),
        SAME_COMMAND + "; and 'a' starts neither its key nor a title word",
    ),
    Case(
        "test_latex_acronym",
        OLD,
        r"""
%! main.tex
\addbibresource{main.bib}
\DeclareAcronym{foo}{cite={
}}
|

%! main.bib
@article{foo,}""",
        {"foo"},
    ),
    Case(
        "test_latex_acronym_two_words",
        OLD,
        r"""
%! main.tex
\addbibresource{main.bib}
\DeclareAcronym{foo}{cite={
a b}}
|
^^^

%! main.bib
@article{foo,}""",
        set(),
        "'a b' is no key list (keys never contain a space), so the cursor is in no key slot",
    ),
    Case(
        "incomplete",
        OLDER,
        r"""
%! main.tex
\addbibresource{main.bib}
\cite{
      |
\begin{foo}
\end{bar}

%! main.bib
@article{foo,}""",
        {"foo"},
    ),
    Case(
        "empty_key",
        OLDER,
        r"""
%! foo.tex
\addbibresource{bar.bib}
\cite{}
      |

%! bar.bib
@article{foo,}

%! baz.bib
@article{bar,}""",
        {"foo"},  # baz.bib is not the draft's bibliography
    ),
    Case(
        "single_key",
        OLDER,
        r"""
%! foo.tex
\addbibresource{bar.bib}
\cite{foo}
      |
      ^^^

%! bar.bib
@article{foo,}

%! baz.bib
@article{bar,}""",
        {"foo"},
    ),
    Case(
        "second_key",
        OLDER,
        r"""
%! foo.tex
\addbibresource{bar.bib}
\cite{foo,}
          |

%! bar.bib
@article{foo,}

%! baz.bib
@article{bar,}""",
        set(),
        SAME_COMMAND,
    ),
    Case(
        "outside_cite",
        OLDER,
        r"""
%! foo.tex
\addbibresource{bar.bib}
\cite{}
       |

%! bar.bib
@article{foo,}""",
        set(),
    ),
    Case(
        "valid_citation / invalid_citation",
        "texlab tests/test_completion_latex_citation.rs (2019), scenario latex/citation",
        r"""
%! foo.tex
\documentclass{article}
\usepackage{biblatex}
\addbibresource{foo.bib}
\begin{document}

\cite{}
      |
\end{document}

%! foo.bib
@article{foo:2019,
    author = {Foo Bar},
    title = {Baz Qux},
    year = {2019},
}

@article{bar:2005,}""",
        {"foo:2019", "bar:2005"},
    ),
]

# citewise's own cases, in the same form: what the issue found missing besides texlab's tests.
OWN_CASES: list[Case] = [
    Case(
        "cursor inside a key: the whole key filters and is replaced",
        "issue 24",
        r"""
%! main.tex
\addbibresource{main.bib}
\cite{foo}
        |
      ^^^

%! main.bib
@article{foo,}
@article{bar,}
@article{foobar,}""",
        {"foo", "foobar"},
    ),
    Case(
        "cursor at the start of a key in a list of two",
        "issue 24",
        r"""
%! main.tex
\addbibresource{main.bib}
\citep[see][p.~3]{bar, foo}
                       |
                       ^^^

%! main.bib
@article{foo,}
@article{bar,}
@article{foobar,}""",
        {"foo", "foobar"},
    ),
    Case(
        "a second slot still completes, without the key already there",
        "issue 24",
        r"""
%! main.tex
\addbibresource{main.bib}
\cite{foo,f
          |
          ^

%! main.bib
@article{foo,}
@article{fab,}
@article{bar,}""",
        {"fab"},
    ),
    Case(
        "no sentence, a draft cited keys above: the latest first",
        "issue 24",
        r"""
%! main.tex
\addbibresource{main.bib}
\nocite{c, a}
\cite{}
      |

%! main.bib
@article{a,}
@article{b,}
@article{c,}""",
        {"a", "b", "c"},
        ordered=["a", "c", "b"],
    ),
]


@dataclass
class Stores:
    """The two sessions every case runs in, and the workspace folder of each case."""

    sessions: dict[str, Session]
    folders: dict[str, str]


def _case_id(case: Case) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", case.name).strip("_")  # \volcite and \Volcite apart


def _write_cases(root: Path, cases: list[Case]) -> dict[str, str]:
    folders = {}
    for case in cases:
        folder = root / _case_id(case)
        folder.mkdir(parents=True)
        for name, text in case.parsed().files.items():
            (folder / name).write_text(text, encoding="utf-8")
        folders[case.name] = folder.name
    return folders


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stores(tmp_path_factory) -> Stores:
    """An empty store, and a new user's store (example library, workspace .bib files imported).

    Every case's files are written before the servers start, so the second one imports their
    ``.bib`` files at start as it would a user's workspace (title-less entries included)."""
    base = tmp_path_factory.mktemp("texlab")
    cases = TEXLAB_CASES + OWN_CASES + COMMAND_CASES + TITLE_CASES
    empty_root, user_root = base / "empty-ws", base / "user-ws"
    folders = _write_cases(empty_root, cases)
    _write_cases(user_root, cases)
    (base / "empty").mkdir()
    empty = await start(empty_root, base / "empty" / "papers.sqlite", options={"rerank": False})
    user_store = build_store(base / "user", with_jsonl=True)
    user = await start(user_root, user_store, options={"rerank": False, "importWorkspaceBibs": True})
    yield Stores({"empty store": empty, "new user's store": user}, folders)
    await stop(empty)
    await stop(user)


async def offered(lsp: Session, folder: str, fx: Fixture) -> types.CompletionList | None:
    """Open the fixture's file with the cursor and ask for completion there until the answer is
    final (the full ranking cached, the .bib indexed); ``None`` where the server completes nothing."""
    text = fx.files[fx.main]
    uri = lsp.open(f"{folder}/{fx.main}", text)
    line, col = fx.cursor

    async def ask() -> types.CompletionList | None | bool:
        got = await lsp.client.text_document_completion_async(
            types.CompletionParams(types.TextDocumentIdentifier(uri), types.Position(line, col))
        )
        if got is None:
            return False  # falsy for poll(): "nothing here" is checked below, once
        assert isinstance(got, types.CompletionList), got
        return got if not got.is_incomplete else None

    got = await ask()
    if got is False:
        return None
    return got or await lsp.poll(ask, f"a final completion list at {fx.cursor}")


def _keys(result: types.CompletionList | None) -> list[str]:
    """The keys the items insert (the label may carry more than the key, the edit never does)."""
    return [i.text_edit.new_text for i in result.items] if result is not None else []


SESSIONS = ["empty store", "new user's store"]


@pytest.mark.parametrize("store", SESSIONS)
@pytest.mark.parametrize("case", TEXLAB_CASES + OWN_CASES, ids=_case_id)
async def test_texlab_case(stores: Stores, case: Case, store: str) -> None:
    fx = case.parsed()
    result = await offered(stores.sessions[store], stores.folders[case.name], fx)
    keys = _keys(result)
    assert set(keys) == case.keys, (case.note or "texlab expects these keys", keys)
    assert len(keys) == len(set(keys))
    assert keys[: len(case.ordered)] == case.ordered
    for item in result.items if result is not None else []:
        assert item.text_edit.range == fx.expected_range, (item.label, item.text_edit.range)


# --------------------------------------------------------------------------------------------
# texlab's default citation commands that citewise did not complete (17 of 56)
# --------------------------------------------------------------------------------------------

# texlab crates/parser/src/config.rs DEFAULT_CITATION_COMMANDS, the ones citewise lacked, plus
# biblatex's \Notecite (texlab lacks it). \citetext, the 17th, takes free text: not completed.
VOLUME_FAMILY = "volcite Volcite pvolcite Pvolcite fvolcite ftvolcite svolcite Svolcite tvolcite Tvolcite avolcite Avolcite".split()
NOTE_FAMILY = "notecite Notecite pnotecite Pnotecite fnotecite".split()
MULTI_VOLUME = "volcites Pvolcites ftvolcites Avolcites".split()  # biblatex's multicite forms


def _command_case(name: str) -> Case:
    """``\\volcite[p]{3}[pp]{|}`` (the key slot after the volume), ``\\notecite[pre][post]{|}``,
    ``\\volcites(a)(b)[p]{3}[pp]{foo}[q]{4}{|}``."""
    if name in MULTI_VOLUME:
        call = f"\\{name}(see)(and)[p]{{3}}[pp]{{foo}}[q]{{4}}{{"
    elif name in VOLUME_FAMILY:
        call = f"\\{name}[p]{{3}}[pp]{{"
    else:
        call = f"\\{name}[pre][post]{{"
    fixture = (
        f"%! main.tex\n\\addbibresource{{main.bib}}\n{call}}}\n{' ' * len(call)}|\n\n"
        "%! main.bib\n@article{foo,}\n@article{bar,}\n"
    )
    return Case(
        name, "texlab DEFAULT_CITATION_COMMANDS", fixture, {"bar"} if name in MULTI_VOLUME else {"foo", "bar"}
    )


COMMAND_CASES = [_command_case(n) for n in VOLUME_FAMILY + NOTE_FAMILY + MULTI_VOLUME]


@pytest.mark.parametrize("store", SESSIONS)
@pytest.mark.parametrize("case", COMMAND_CASES, ids=lambda c: c.name)
async def test_every_texlab_citation_command_completes(stores: Stores, case: Case, store: str) -> None:
    fx = case.parsed()
    result = await offered(stores.sessions[store], stores.folders[case.name], fx)
    assert set(_keys(result)) == case.keys
    assert all(i.text_edit.range == fx.expected_range for i in result.items)


@pytest.mark.parametrize("name", ["volcite", "Svolcite", "volcites"])
async def test_the_volume_of_volcite_is_no_key_slot(stores: Stores, name: str) -> None:
    lsp = stores.sessions["empty store"]
    folder = stores.folders[_command_case(name).name]
    fx = parse_fixture(
        f"%! volume-{name}.tex\n\\addbibresource{{main.bib}}\n\\{name}[p]{{}}[pp]{{}}\n{' ' * (len(name) + 5)}|\n"
    )
    assert await offered(lsp, folder, fx) is None


# --------------------------------------------------------------------------------------------
# No sentence around the slot: the draft's title and abstract rank its .bib
# --------------------------------------------------------------------------------------------

TITLE_CASES = [
    Case(
        "a fresh draft's title ranks its bib, after the keys it cited",
        "issue 24",
        r"""
%! main.tex
\documentclass{article}
\addbibresource{main.bib}
\title{Dense passage retrieval for open-domain question answering}
\begin{document}
\maketitle
\nocite{vaswani2017attention}
\cite{
      |
\end{document}

%! main.bib
@article{robertson2009probabilistic,
  title = {The Probabilistic Relevance Framework: {BM25} and Beyond},
  author = {Robertson, Stephen and Zaragoza, Hugo},
  year = {2009}
}
@inproceedings{vaswani2017attention,
  title = {Attention Is All You Need},
  author = {Vaswani, Ashish},
  year = {2017}
}
@inproceedings{myDPR,
  title = {Dense Passage Retrieval for Open-Domain Question Answering},
  author = {Karpukhin, Vladimir and Oguz, Barlas},
  year = {2020}
}""",
        {"vaswani2017attention", "myDPR", "robertson2009probabilistic"},
        ordered=["vaswani2017attention", "myDPR", "robertson2009probabilistic"],
    ),
]


async def test_the_title_ranks_the_bib_when_no_sentence_is_there(stores: Stores) -> None:
    """On the new user's store the title finds the DPR paper, which the .bib holds as ``myDPR``:
    it comes right after the key cited just above, before the .bib's first entry; store papers
    that are not in the .bib follow the .bib (the title matches a few of them)."""
    case = TITLE_CASES[0]
    result = await offered(stores.sessions["new user's store"], stores.folders[case.name], case.parsed())
    keys = _keys(result)
    assert keys[:3] == case.ordered, keys
    assert len(keys) > 3 and "karpukhin2020dense" not in keys  # the same paper, under its .bib key


async def test_an_empty_store_ranks_the_bib_by_the_title(stores: Stores) -> None:
    """With nothing in the store the draft's own entries are still ranked, never listed in the
    file's order: the key cited just above, then the entry the title finds, then the others."""
    case = TITLE_CASES[0]
    result = await offered(stores.sessions["empty store"], stores.folders[case.name], case.parsed())
    assert _keys(result) == case.ordered


async def test_without_a_store_the_bib_is_still_offered(tmp_path: Path) -> None:
    """A store that cannot be opened (its folder does not exist) is an error message; the draft's
    own keys are still completed, marked incomplete so the client asks again later."""
    case = TEXLAB_CASES[0]  # texlab's "citation": foo:2019 and the title-less bar:2005
    fx = case.parsed()
    _write_cases(tmp_path / "ws", [case])
    lsp = await start(tmp_path / "ws", tmp_path / "no-such-folder" / "papers.sqlite", ready=False)
    try:
        await lsp.wait_for(lambda: any("cannot open" in m for m in lsp.shown()), "the store error")
        uri = lsp.open(f"{_case_id(case)}/{fx.main}", fx.files[fx.main])
        got = await lsp.client.text_document_completion_async(
            types.CompletionParams(types.TextDocumentIdentifier(uri), types.Position(*fx.cursor))
        )
        assert isinstance(got, types.CompletionList) and got.is_incomplete
        assert sorted(_keys(got)) == ["bar:2005", "foo:2019"]
    finally:
        await stop(lsp)
