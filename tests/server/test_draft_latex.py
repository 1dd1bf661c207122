"""Table tests for the LaTeX side of draft reading (and the shared position/dispatch helpers).

Fixtures are inline; ``|`` marks the cursor. Each table row is one case, so a failure names the
exact source that broke.
"""

from __future__ import annotations

import pytest

from citewise.server import latex
from citewise.server.draft import (
    LineIndex,
    citation_at,
    find_citations,
    global_context,
    is_placeholder_token,
    language_for,
    local_context,
    offset_to_position,
    placeholders,
    position_to_offset,
)
from citewise.server.draft import bibliography_files as bib_files


def cursor(src: str) -> tuple[str, int]:
    off = src.index("|")
    return src[:off] + src[off + 1 :], off


def found(text: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(c.command, tuple(k.key for k in c.keys)) for c in find_citations(text, "latex")]


# --------------------------------------------------------------------------------------------
# find_citations: every command
# --------------------------------------------------------------------------------------------

NATBIB = "cite citep citet citealp citealt citeauthor citeyear citeyearpar citefullauthor citenum".split()
BIBLATEX = (
    "parencite textcite autocite footcite footcitetext smartcite supercite nocite fullcite footfullcite "
    "citetitle citeurl citedate"
).split()
CAPITALISED = (
    "Cite Citep Citet Citealp Citealt Citeauthor Textcite Autocite Parencite Smartcite Footcite".split()
)
APACITE = "citeA citeNP shortcite shortciteA shortciteNP fullciteA".split()
MULTI = "cites parencites textcites autocites footcites smartcites supercites Cites Parencites Textcites Autocites".split()
ALL_SINGLE = NATBIB + BIBLATEX + CAPITALISED + APACITE + ["bibentry"]


@pytest.mark.parametrize("name", ALL_SINGLE)
@pytest.mark.parametrize("star", ["", "*"])
def test_every_single_command(name: str, star: str) -> None:
    text = f"As shown \\{name}{star}{{smith2020Deep}}."
    assert found(text) == [(f"\\{name}{star}", ("smith2020Deep",))]
    (c,) = find_citations(text, "latex")
    assert text[c.start : c.end] == f"\\{name}{star}{{smith2020Deep}}"
    assert c.groups == ((text.index("{"), c.end),)


@pytest.mark.parametrize("name", ALL_SINGLE + MULTI)
@pytest.mark.parametrize(
    "args",
    ["[p.~3]", "[see][]", "[see][p.~3]", " [see] [p. 3] ", "[{a]b}]", "[see \\emph{e.g.}][ch. 2]", "[\n]"],
)
def test_every_command_with_optional_arguments(name: str, args: str) -> None:
    text = f"x \\{name}{args}{{a,b}} y"
    assert found(text) == [(f"\\{name}", ("a", "b"))]
    (c,) = find_citations(text, "latex")
    assert text[c.end - 5 : c.end] == "{a,b}"


@pytest.mark.parametrize("name", MULTI)
def test_every_multicite_command(name: str) -> None:
    text = f"\\{name}(global pre)(global post)[pre][post]{{a}}[p. 2]{{b, c}}{{d}} rest"
    (c,) = find_citations(text, "latex")
    assert c.command == f"\\{name}"
    assert [k.key for k in c.keys] == ["a", "b", "c", "d"]
    assert len(c.groups) == 3
    assert text[c.end - 3 : c.end] == "{d}"


FIND_CASES: list[tuple[str, list[tuple[str, tuple[str, ...]]]]] = [
    # plain forms and key shapes
    (r"\cite{a}", [(r"\cite", ("a",))]),
    (r"\cite{a,b}", [(r"\cite", ("a", "b"))]),
    (r"\cite{a, b , c}", [(r"\cite", ("a", "b", "c"))]),
    (r"\cite{ a }", [(r"\cite", ("a",))]),
    (r"\cite{smith2020Deep}", [(r"\cite", ("smith2020Deep",))]),
    (r"\cite{Smith_2020}", [(r"\cite", ("Smith_2020",))]),
    (r"\cite{doe:2019:abc}", [(r"\cite", ("doe:2019:abc",))]),
    (r"\cite{10.1145/3331184.3331211}", [(r"\cite", ("10.1145/3331184.3331211",))]),
    (r"\cite{DBLP:conf/sigir/Smith20}", [(r"\cite", ("DBLP:conf/sigir/Smith20",))]),
    (r"\cite{o'neil-2020+x}", [(r"\cite", ("o'neil-2020+x",))]),
    (r"\cite{müller2021}", [(r"\cite", ("müller2021",))]),
    (r"\nocite{*}", [(r"\nocite", ("*",))]),
    # placeholders
    (r"\cite{}", [(r"\cite", ("",))]),
    (r"\cite{?}", [(r"\cite", ("?",))]),
    (r"\cite{??}", [(r"\cite", ("??",))]),
    (r"\cite{TODO}", [(r"\cite", ("TODO",))]),
    (r"\cite{XXX}", [(r"\cite", ("XXX",))]),
    (r"\cite{a,}", [(r"\cite", ("a", ""))]),
    (r"\cite{a, ,b}", [(r"\cite", ("a", "", "b"))]),
    (r"\cite{ }", [(r"\cite", ("",))]),
    (r"\cite<>", [(r"\cite<>", ("",))]),
    (r"\cite< >.", [(r"\cite<>", ("",))]),
    (r"\citep<>", [(r"\citep<>", ("",))]),
    # apacite <prefix> is an argument, not a to-do marker
    (r"\cite<e.g.,>{a}", [(r"\cite", ("a",))]),
    (r"\cite<see>[p. 3]{a}", [(r"\cite", ("a",))]),
    (r"\cite<>{a}", [(r"\cite", ("a",))]),
    (r"\cite<see>", []),
    # spacing and line breaks
    (r"\cite {a}", [(r"\cite", ("a",))]),
    ("\\cite\n{a}", [(r"\cite", ("a",))]),
    ("\\cite{a,\n  b}", [(r"\cite", ("a", "b"))]),
    ("\\cite{a,% comment, with commas\n b}", [(r"\cite", ("a", "b"))]),
    ("\\citep[see]\n[p. 3]\n{a}", [(r"\citep", ("a",))]),
    # several citations
    (r"\citet{a} and \citep{b}", [(r"\citet", ("a",)), (r"\citep", ("b",))]),
    (r"\cite{a}\cite{b}", [(r"\cite", ("a",)), (r"\cite", ("b",))]),
    (r"(\citealp{a}; \citealt{b})", [(r"\citealp", ("a",)), (r"\citealt", ("b",))]),
    (r"\cite{a}{b}", [(r"\cite", ("a",))]),  # only multicite commands take several groups
    (r"\cites{a}[p. 2]", [(r"\cites", ("a",))]),
    (r"\textcites[see][]{a}[][]{b}", [(r"\textcites", ("a", "b"))]),
    (r"\autocites{a}{b}{c}", [(r"\autocites", ("a", "b", "c"))]),
    (r"\cites{a}{b", [(r"\cites", ("a", "b"))]),
    # unclosed (being typed)
    (r"\cite{smi", [(r"\cite", ("smi",))]),
    ("\\cite{smi\nnext line}", [(r"\cite", ("smi",))]),
    (r"\cite{a, smi", [(r"\cite", ("a", "smi"))]),
    (r"\cite{a,", [(r"\cite", ("a", ""))]),
    (r"\cite{", [(r"\cite", ("",))]),
    (r"\cite{smi and more text", [(r"\cite", ("smi",))]),
    ("\\cite{a,\n\nb}", [(r"\cite", ("a", ""))]),
    # not citations
    (r"\cite", []),
    (r"\cite a", []),
    (r"\citep[p. 3]", []),
    (r"\citep[p. 3", []),
    (r"\citestyle{plain}", []),
    (r"\citetext{see}", []),
    (r"\excite{a}", []),
    (r"\cited{a}", []),
    (r"\citeindextrue", []),
    (r"\volcite{2}", []),  # the volume only: no key list yet
    (r"\cite{\mykeys}", []),
    (r"\cite{{a}}", []),
    (r"\newcommand{\mycite}[1]{\cite{#1}}", []),
    (r"cite{a}", []),
    (r"\\cite{a}", []),  # \\ is a line break, then the word "cite"
    (r"\\\cite{a}", [(r"\cite", ("a",))]),
    # comments and verbatim
    (r"% \cite{a}", []),
    (r"text % \cite{a}", []),
    ("% \\cite{a}\n\\cite{b}", [(r"\cite", ("b",))]),
    (r"100\% \cite{a}", [(r"\cite", ("a",))]),
    (r"100\\% \cite{a}", []),
    ("\\begin{verbatim}\n\\cite{a}\n\\end{verbatim}\n\\cite{b}", [(r"\cite", ("b",))]),
    ("\\begin{lstlisting}\n\\cite{a}\n\\end{lstlisting}", []),
    ("\\begin{comment}\n\\cite{a}\n\\end{comment}\\cite{b}", [(r"\cite", ("b",))]),
    ("\\begin{minted}{tex}\n\\cite{a}", []),
    ("% \\begin{verbatim}\n\\cite{a}", [(r"\cite", ("a",))]),
    (r"\verb|\cite{a}| and \cite{b}", [(r"\cite", ("b",))]),
    (r"\verb+\cite{a}+", []),
    # math, environments and other context do not matter
    (r"$x$ \cite{a} $y$", [(r"\cite", ("a",))]),
    (r"\footnote{See \cite{a}.}", [(r"\cite", ("a",))]),
    (r"\emph{\citet{a}}", [(r"\citet", ("a",))]),
    ("", []),
    ("no citations here", []),
]


@pytest.mark.parametrize(("text", "expected"), FIND_CASES)
def test_find_citations(text: str, expected: list[tuple[str, tuple[str, ...]]]) -> None:
    assert found(text) == expected
    for c in find_citations(text, "latex"):
        for k in c.keys:
            assert text[k.start : k.end] == k.key
            assert k.placeholder == is_placeholder_token(k.key)


@pytest.mark.parametrize(
    ("text", "closed"),
    [
        (r"\cite{a}", True),
        (r"\cite{a", False),
        (r"\cite{a,", False),
        (r"\cite<>", True),
        (r"\cites{a}{b", False),
    ],
)
def test_closed_flag(text: str, closed: bool) -> None:
    (c,) = find_citations(text, "latex")
    assert c.closed is closed
    assert c.end == len(text) or text[c.end - 1] in "}>"


def test_group_ranges_cover_the_braces() -> None:
    text = r"x \parencites[a][b]{k1}[c]{k2, k3} y"
    (c,) = find_citations(text, "latex")
    assert [text[s:e] for s, e in c.groups] == ["{k1}", "{k2, k3}"]
    assert text[c.start : c.end] == r"\parencites[a][b]{k1}[c]{k2, k3}"


# --------------------------------------------------------------------------------------------
# placeholders
# --------------------------------------------------------------------------------------------

PLACEHOLDER_CASES: list[tuple[str, list[str]]] = [
    (r"\cite{}", [""]),
    (r"\cite{?}", ["?"]),
    (r"\cite{??}", ["??"]),
    (r"\cite{???}", ["???"]),
    (r"\cite{TODO}", ["TODO"]),
    (r"\cite{todo}", ["todo"]),
    (r"\cite{XXX}", ["XXX"]),
    (r"\cite{TBD}", ["TBD"]),
    (r"\cite{FIXME}", ["FIXME"]),
    (r"\cite{...}", ["..."]),
    (r"\cite{a, ?}", ["?"]),
    (r"\cite{?, ?}", ["?", "?"]),
    (r"\cite{a,}", [""]),
    (r"\citep[see][]{?}", ["?"]),
    (r"\parencites{a}{?}", ["?"]),
    (r"\cite<>", [""]),
    (r"\cite{a}", []),
    (r"\cite{todo2020}", []),
    (r"\cite{xxxl}", []),
    (r"\cite{a?}", []),
    (r"% \cite{?}", []),
    (r"\cite{smi", []),
    (r"\cite{?} and \citet{TODO} and \cite{ok}", ["?", "TODO"]),
]


@pytest.mark.parametrize(("text", "tokens"), PLACEHOLDER_CASES)
def test_placeholders(text: str, tokens: list[str]) -> None:
    found_ph = placeholders(text, "latex")
    assert [p.token for p in found_ph] == tokens
    for p in found_ph:
        assert p.citation.start <= p.start <= p.end <= p.citation.end


@pytest.mark.parametrize(
    ("src", "expected_after_fill"),
    [
        (r"see \cite{?}.", r"see \cite{K}."),
        (r"see \cite{}.", r"see \cite{K}."),
        (r"see \cite{a, }.", r"see \cite{a, K}."),
        (r"see \cite{a,}.", r"see \cite{a,K}."),
        (r"see \cite{ TODO }.", r"see \cite{ K }."),
        (r"see \cite<>.", r"see \cite{K}."),
        (r"see \citep<>.", r"see \citep{K}."),
        (r"see \citep*<>.", r"see \citep*{K}."),
        (r"see \textcites{a}{??}.", r"see \textcites{a}{K}."),
    ],
)
def test_placeholder_replacement(src: str, expected_after_fill: str) -> None:
    (p,) = placeholders(src, "latex")
    assert src[: p.start] + p.replacement("K") + src[p.end :] == expected_after_fill


def test_placeholder_context_excludes_markers() -> None:
    text = r"Graph neural networks \cite{kipf2017} improve citation recommendation \cite{?} on large corpora."
    (p,) = placeholders(text, "latex")
    assert p.context == "Graph neural networks improve citation recommendation on large corpora."


# --------------------------------------------------------------------------------------------
# citation_at
# --------------------------------------------------------------------------------------------

# (source with cursor, expected text after choosing key "K", prefix, placeholder)
CURSOR_CASES: list[tuple[str, str, str, bool]] = [
    (r"\cite{|}", r"\cite{K}", "", True),
    (r"\cite{ | }", r"\cite{ K }", "", True),
    (r"\cite{smi|}", r"\cite{K}", "smi", False),
    (r"\cite{smi|th2020}", r"\cite{K}", "smi", False),
    (r"\cite{|smith}", r"\cite{K}", "", False),
    (r"\cite{smith|}", r"\cite{K}", "smith", False),
    (r"\cite{a, b,|}", r"\cite{a, b,K}", "", True),
    (r"\cite{a, b, |}", r"\cite{a, b, K}", "", True),
    (r"\cite{a, b,| }", r"\cite{a, b,K }", "", True),
    (r"\cite{a|, b}", r"\cite{K, b}", "a", False),
    (r"\cite{a, b|}", r"\cite{a, K}", "b", False),
    (r"\cite{a, sm|, c}", r"\cite{a, K, c}", "sm", False),
    (r"\cite{a,| b}", r"\cite{a,K, b}", "", True),
    (r"\cite{a |, b}", r"\cite{a ,K, b}", "", True),
    (r"\cite{a,,|,b}", r"\cite{a,,K,b}", "", True),
    (r"\cite{?|}", r"\cite{K}", "", True),
    (r"\cite{|?}", r"\cite{K}", "", True),
    (r"\cite{??|}", r"\cite{K}", "", True),
    (r"\cite{TODO|}", r"\cite{K}", "", True),
    (r"\cite{TO|DO}", r"\cite{K}", "", True),
    (r"\cite{XXX|}", r"\cite{K}", "", True),
    (r"\cite{a, ?|}", r"\cite{a, K}", "", True),
    (r"\cite{doe:2019:|abc}", r"\cite{K}", "doe:2019:", False),
    (r"\cite{10.1145/|3331184.3331211}", r"\cite{K}", "10.1145/", False),
    (r"\cite<|>", r"\cite{K}", "", True),
    (r"\cite< | >", r"\cite{K}", "", True),
    (r"\cite<>|", r"\cite{K}", "", True),
    (r"\citet<|>", r"\citet{K}", "", True),
    (r"\citep[see][p.~3]{|}", r"\citep[see][p.~3]{K}", "", True),
    (r"\citep[see]{sm|}", r"\citep[see]{K}", "sm", False),
    (r"\citep*{a,|}", r"\citep*{a,K}", "", True),
    (r"\Textcite{|}", r"\Textcite{K}", "", True),
    (r"\parencites[a][b]{x}[c]{|}", r"\parencites[a][b]{x}[c]{K}", "", True),
    (r"\parencites[a][b]{|}[c]{y}", r"\parencites[a][b]{K}[c]{y}", "", True),
    (r"\cites{x}{y, z|}", r"\cites{x}{y, K}", "z", False),
    (r"\textcites(pre)(post){a}{b,|}", r"\textcites(pre)(post){a}{b,K}", "", True),
    (r"\cite{smi|", r"\cite{K", "smi", False),
    (r"\cite{|", r"\cite{K", "", True),
    (r"\cite{a, |", r"\cite{a, K", "", True),
    ("\\cite{sm|\nrest of paragraph", "\\cite{K\nrest of paragraph", "sm", False),
    ("\\cite{a,\n  sm|}", "\\cite{a,\n  K}", "sm", False),
    ("\\cite{a,\n  |}", "\\cite{a,\n  K}", "", True),
    ("\\cite{a,% note\n  |}", "\\cite{a,% note\n  K}", "", True),
    (r"text \cite{a} more \citet{b, |} end", r"text \cite{a} more \citet{b, K} end", "", True),
    (r"\footnote{\cite{x|}}", r"\footnote{\cite{K}}", "x", False),
]


@pytest.mark.parametrize(("src", "after", "prefix", "placeholder"), CURSOR_CASES)
def test_citation_at(src: str, after: str, prefix: str, placeholder: bool) -> None:
    text, off = cursor(src)
    cc = citation_at(text, off, "latex")
    assert cc is not None
    assert cc.start <= off <= cc.end
    assert "\n" not in text[cc.start : cc.end]
    assert text[: cc.start] + cc.replacement("K") + text[cc.end :] == after
    assert cc.prefix == prefix
    assert cc.placeholder is placeholder
    assert cc.typed == text[cc.start : off]
    if cc.key_index is not None:
        assert cc.key == cc.citation.keys[cc.key_index]


NO_CURSOR_CASES = [
    r"|\cite{a}",
    r"\ci|te{a}",
    r"\cite|{a}",
    r"\cite{a}|",
    r"\cite{a} |",
    r"\citep[se|e]{a}",
    r"\citep[see][p.|~3]{a}",
    r"\cites(glo|bal){a}",
    r"% \cite{|}",
    r"\cite|",
    r"\cite<see|>",
    r"plain | text",
    "|",
    r"\verb|\cite{a}| and \cite{b}".replace("|\\cite{a}|", "!\\cite{|}!"),
]


@pytest.mark.parametrize("src", NO_CURSOR_CASES)
def test_citation_at_outside_key_lists(src: str) -> None:
    text, off = cursor(src)
    assert citation_at(text, off, "latex") is None


def test_citation_at_filter_text() -> None:
    text, off = cursor(r"\cite{??|}")
    cc = citation_at(text, off, "latex")
    assert cc is not None and cc.filter_text("smith") == "??smith"
    text, off = cursor(r"\cite{smi|}")
    cc = citation_at(text, off, "latex")
    assert cc is not None and cc.filter_text("smith") == "smith"
    text, off = cursor(r"\cite<|>")
    cc = citation_at(text, off, "latex")
    assert cc is not None and cc.filter_text("smith") == r"\cite<smith"


def test_citation_at_clamps_offset() -> None:
    far = citation_at(r"\cite{a", 10_000, "latex")
    assert far is not None and far.offset == 7 and far.prefix == "a"
    assert citation_at(r"\cite{a}", -5, "latex") is None


# --------------------------------------------------------------------------------------------
# local_context
# --------------------------------------------------------------------------------------------

LOCAL_CASES: list[tuple[str, int, str]] = [
    (r"Deep nets \cite{|} work.", 200, "Deep nets work."),
    (r"Deep nets~\cite{|} work.", 200, "Deep nets work."),
    (r"As shown by \citet{a}, deep nets \cite{?|} work \citep{b}.", 200, "As shown by, deep nets work."),
    (r"We use \emph{graph} \textbf{neural} networks \cite{|}.", 200, "We use graph neural networks."),
    (r"See Section~\ref{sec:x} and Figure~\ref{fig:y} \cite{|}.", 200, "See Section and Figure."),
    ("Deep nets % a comment\n work \\cite{|}.", 200, "Deep nets work."),
    ("Deep nets \\cite{|}. % TODO cite more\nNext line.", 200, "Deep nets."),
    # The context is the sentence of the placeholder (plus the previous one when it has just begun).
    (
        "BM25 is classic. Neural rankers read pairs \\cite{|} well. Section Two starts here.",
        200,
        "BM25 is classic. Neural rankers read pairs well.",
    ),
    (
        "First long sentence about sparse retrieval and term weighting models. Then dense retrieval "
        "with dual encoders trained on question answering data \\cite{|}. Next topic.",
        200,
        "Then dense retrieval with dual encoders trained on question answering data.",
    ),
    (r"Accuracy is 95\% \cite{|}.", 200, "Accuracy is 95%."),
    (r"Cost is $O(n^2)$ \cite{|}.", 200, "Cost is O(n^2)."),
    (r"The $\alpha$ value \cite{|}.", 200, "The value."),
    (r"Models \label{x}\cite{|}\footnote{See the appendix.}", 200, "Models See the appendix."),
    (r"Use the \url{http://x.org} tool \cite{|}.", 200, "Use the tool."),
    (r"Use \href{http://x.org}{our tool} \cite{|}.", 200, "Use our tool."),
    (r"\section{Related Work} Graphs \cite{|}.", 200, "Related Work Graphs."),
    ("\\begin{itemize}\n\\item Graphs \\cite{|}\n\\end{itemize}", 200, "Graphs"),
    (r"na\"ive models \cite{|}", 200, "naive models"),
    (r"Deep nets \cite<|> work.", 200, "Deep nets work."),
    (r"Deep nets \cite{a, b,|} work.", 200, "Deep nets work."),
    (r"Deep nets work|", 200, "Deep nets work"),
    (r"|Deep nets work", 200, "Deep nets work"),
    (r"Deep ne|ts work", 200, "Deep nets work"),
    (r"one two three four five \cite{|} six seven", 12, "five six"),
    (r"one two three four five \cite{|} six seven", 20, "four five six"),
    (r"alpha beta gamma delta \cite{|}", 11, "gamma delta"),
    (r"\cite{|} alpha beta gamma delta", 11, "alpha beta"),
    (r"Deep nets \cite{|}", 0, ""),
]


@pytest.mark.parametrize(("src", "size", "expected"), LOCAL_CASES)
def test_local_context(src: str, size: int, expected: str) -> None:
    text, off = cursor(src)
    assert local_context(text, off, "latex", size=size) == expected


def test_local_context_size_and_split() -> None:
    before = " ".join(f"b{i}" for i in range(200))
    after = " ".join(f"a{i}" for i in range(200))
    text = f"{before} \\cite{{?}} {after}"
    ctx = local_context(text, text.index("?"), "latex", size=90)
    assert 80 <= len(ctx) <= 90
    words = ctx.split()
    n_before = sum(w.startswith("b") for w in words)
    n_after = sum(w.startswith("a") for w in words)
    assert words[n_before - 1] == "b199" and words[n_before] == "a0"
    assert n_before > n_after  # about 2/3 before the citation
    assert "\\" not in ctx and "{" not in ctx


def test_local_context_budget_moves_to_the_side_with_text() -> None:
    before = " ".join(f"w{i}" for i in range(300))
    text = before + r" \cite{?}"
    ctx = local_context(text, len(text) - 2, "latex", size=120)
    assert 110 <= len(ctx) <= 120
    assert ctx.endswith("w299")


def test_local_context_skips_long_comment_blocks() -> None:
    comment = "\n".join("% " + "noise " * 20 for _ in range(50))
    text = f"signal words here\n{comment}\n\\cite{{?}}"
    assert local_context(text, len(text) - 2, "latex", size=60) == "signal words here"


# --------------------------------------------------------------------------------------------
# global_context
# --------------------------------------------------------------------------------------------

GLOBAL_CASES: list[tuple[str, tuple[str, str]]] = [
    (r"\title{Deep Citation Recommendation}", ("Deep Citation Recommendation", "")),
    (r"\title[Short]{Long \emph{Title}}", ("Long Title", "")),
    ("\\title{Line one\\\\ line two}", ("Line one line two", "")),
    (r"\title{Deep\thanks{Funded by \textbf{X}.} Learning}", ("Deep Learning", "")),
    ("% \\title{Old}\n\\title{New}", ("New", "")),
    (r"\icmltitle{ICML Paper}", ("ICML Paper", "")),
    ("\\title{A {nested {brace}} title}", ("A nested brace title", "")),
    ("\\title\n  {Spaced}", ("Spaced", "")),
    (
        "\\begin{abstract}\nWe study \\emph{citations}~\\cite{a} with 95\\% recall. % hidden\n\\end{abstract}",
        ("", "We study citations with 95% recall."),
    ),
    ("\\begin{abstract}[Summary]\nShort.\n\\end{abstract}", ("", "Short.")),
    ("\\abstract{Command form.}", ("", "Command form.")),
    ("\\begin{abstract}\nUnclosed abstract", ("", "Unclosed abstract")),
    ("% \\begin{abstract} no \\end{abstract}", ("", "")),
    (
        "\\documentclass{article}\n\\title{T}\n\\begin{document}\n\\maketitle\n\\begin{abstract}A.\\end{abstract}",
        ("T", "A."),
    ),
    ("no title here", ("", "")),
    ("", ("", "")),
]


@pytest.mark.parametrize(("text", "expected"), GLOBAL_CASES)
def test_global_context(text: str, expected: tuple[str, str]) -> None:
    assert global_context(text, "latex") == expected


def test_global_context_follows_inputs() -> None:
    files = {
        "front.tex": "\\title{From Front}\n\\input{sections/abstract}",
        "sections/abstract.tex": "\\begin{abstract}Included abstract.\\end{abstract}",
    }
    asked: list[str] = []

    def read(name: str) -> str | None:
        asked.append(name)
        return files.get(name)

    main = "\\documentclass{article}\n\\input{front}\n\\begin{document}\\end{document}"
    assert global_context(main, "latex", read) == ("From Front", "Included abstract.")
    assert asked[0] == "front.tex"


def test_global_context_abstract_body_is_an_input() -> None:
    files = {"abstract.tex": "Text of the \\emph{abstract}."}
    main = "\\title{T}\\begin{abstract}\n\\input{abstract}\n\\end{abstract}"
    assert global_context(main, "latex", files.get) == ("T", "Text of the abstract.")


@pytest.mark.parametrize(
    "command",
    [r"\input{x}", r"\input{x.tex}", r"\include{x}", r"\subfile{x}", r"\import{}{x}", r"\subimport{./}{x}"],
)
def test_global_context_include_commands(command: str) -> None:
    files = {"x.tex": r"\title{Found}", "./x.tex": r"\title{Found}"}
    assert global_context(command, "latex", files.get) == ("Found", "")


def test_global_context_cycles_and_failures_end() -> None:
    files = {"a.tex": r"\input{b}", "b.tex": r"\input{a}\input{boom}"}

    def read(name: str) -> str | None:
        if name.startswith("boom"):
            raise OSError("unreadable")
        return files.get(name)

    assert global_context(r"\input{a}", "latex", read) == ("", "")
    assert global_context(r"\input{self}", "latex", lambda n: r"\input{self}") == ("", "")


def test_global_context_ignores_commented_inputs() -> None:
    files = {"x.tex": r"\title{Hidden}"}
    assert global_context("% \\input{x}", "latex", files.get) == ("", "")


# --------------------------------------------------------------------------------------------
# bibliography_files
# --------------------------------------------------------------------------------------------

BIB_CASES: list[tuple[str, list[str]]] = [
    (r"\bibliography{refs}", ["refs.bib"]),
    (r"\bibliography{refs.bib}", ["refs.bib"]),
    (r"\bibliography{a,b}", ["a.bib", "b.bib"]),
    ("\\bibliography{ a ,\n  b.bib , c }", ["a.bib", "b.bib", "c.bib"]),
    (r"\bibliography{../shared/refs}", ["../shared/refs.bib"]),
    (r"\bibliography{}", []),
    (r"\nobibliography{x}", ["x.bib"]),
    (r"\addbibresource{x.bib}", ["x.bib"]),
    (r"\addbibresource {x.bib}", ["x.bib"]),
    ("\\addbibresource\n  [datatype=bibtex]\n  {x.bib}", ["x.bib"]),
    ("\\addbibresource{ spaced name.bib }", ["spaced name.bib"]),
    ("\\bibliography{refs}% trailing comment", ["refs.bib"]),
    (r"\addbibresource[datatype=bibtex]{x.bib}", ["x.bib"]),
    (r"\addbibresource[location=remote]{http://x.org/a.bib}", []),
    (r"\addbibresource[location = remote, label=x]{ftp://x.org/a.bib}", []),
    (r"\addbibresource{https://x.org/a.bib}", []),
    (r"\addglobalbib{g.bib}", ["g.bib"]),
    (r"\addsectionbib[label=s]{s.bib}", ["s.bib"]),
    (r"\addbibresource{a.bib}\addbibresource{a.bib}", ["a.bib"]),
    (r"\addbibresource{a.bib}\bibliography{b}", ["a.bib", "b.bib"]),
    (r"% \bibliography{hidden}", []),
    (r"\bibliographystyle{plain}", []),
    (r"\printbibliography", []),
    ("", []),
]


@pytest.mark.parametrize(("text", "expected"), BIB_CASES)
def test_bibliography_files(text: str, expected: list[str]) -> None:
    assert bib_files(text, "latex") == expected


def test_bibliography_files_in_included_preamble() -> None:
    files = {"preamble.tex": r"\addbibresource{inc.bib}"}
    assert bib_files(r"\input{preamble}\bibliography{main}", "latex", files.get) == ["main.bib", "inc.bib"]
    assert bib_files(r"\input{preamble}", "latex") == []


# --------------------------------------------------------------------------------------------
# Shared helpers: language_for, placeholder tokens, positions
# --------------------------------------------------------------------------------------------

LANGUAGE_CASES: list[tuple[str, str | None, str | None]] = [
    ("paper.tex", None, "latex"),
    ("paper.TEX", None, "latex"),
    ("paper.ltx", None, "latex"),
    ("paper.latex", None, "latex"),
    ("analysis.Rnw", None, "latex"),
    ("file:///home/u/paper%20draft.tex", None, "latex"),
    ("file:///C:/Users/u/paper.tex", None, "latex"),
    (r"C:\Users\u\paper.tex", None, "latex"),
    ("notes.md", None, "markdown"),
    ("notes.markdown", None, "markdown"),
    ("paper.qmd", None, "markdown"),
    ("paper.Rmd", None, "markdown"),
    ("paper.rmd", None, "markdown"),
    ("file:///x/paper.qmd", None, "markdown"),
    ("macros.sty", None, None),
    ("class.cls", None, None),
    ("refs.bib", None, None),
    ("script.py", None, None),
    ("Makefile", None, None),
    (".tex", None, None),
    ("untitled:Untitled-1", "latex", "latex"),
    ("untitled:Untitled-1", "markdown", "markdown"),
    ("untitled:Untitled-1", "quarto", "markdown"),
    ("x.txt", "rmd", "markdown"),
    ("x.md", "latex", "latex"),
    ("x.tex", "plaintext", "latex"),
    ("x.unknown", "plaintext", None),
]


@pytest.mark.parametrize(("path", "language_id", "expected"), LANGUAGE_CASES)
def test_language_for(path: str, language_id: str | None, expected: str | None) -> None:
    assert language_for(path, language_id) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("", True),
        ("?", True),
        ("??", True),
        ("TODO", True),
        ("todo", True),
        ("XXX", True),
        ("xxxx", True),
        ("TBD", True),
        ("FIXME", True),
        ("...", True),
        ("…", True),
        ("smith2020", False),
        ("todo2020", False),
        ("?a", False),
        ("x", False),
    ],
)
def test_is_placeholder_token(key: str, expected: bool) -> None:
    assert is_placeholder_token(key) is expected


POSITION_CASES: list[tuple[str, int, tuple[int, int]]] = [
    ("", 0, (0, 0)),
    ("abc", 2, (0, 2)),
    ("abc", 3, (0, 3)),
    ("a\nb", 2, (1, 0)),
    ("a\nbc", 4, (1, 2)),
    ("a\r\nb", 3, (1, 0)),
    ("a\rb", 2, (1, 0)),
    ("a\n", 2, (1, 0)),
    ("é\nx", 1, (0, 1)),
    ("😀x", 1, (0, 2)),
    ("😀x", 2, (0, 3)),
    ("a\n😀😀b", 5, (1, 5)),
    ("a\n😀😀b", 4, (1, 4)),
]


@pytest.mark.parametrize(("text", "offset", "position"), POSITION_CASES)
def test_positions(text: str, offset: int, position: tuple[int, int]) -> None:
    assert offset_to_position(text, offset) == position
    assert position_to_offset(text, *position) == offset


@pytest.mark.parametrize(
    ("text", "line", "character", "offset"),
    [
        ("abc", 0, 99, 3),
        ("abc", 5, 0, 3),
        ("abc", -1, 0, 0),
        ("ab\ncd", 0, 99, 2),
        ("ab\r\ncd", 0, 99, 2),
        ("😀x", 0, 1, 0),  # inside a surrogate pair: start of the character
        ("😀x", 0, 2, 1),
    ],
)
def test_position_to_offset_clamps(text: str, line: int, character: int, offset: int) -> None:
    assert position_to_offset(text, line, character) == offset


def test_line_index_round_trip() -> None:
    text = "l0\r\nl1 😀 x\rl2\n\nl4 é"
    index = LineIndex(text)
    assert index.line_count == 5
    for off in range(len(text) + 1):
        if text[off - 1 : off + 1] == "\r\n":
            continue
        assert index.offset(*index.position(off)) == off


def test_command_table_has_capitals_and_multicites() -> None:
    for name in ["Cite", "Citep", "Textcite", "Autocite", "Parencite", "Parencites", "Textcites"]:
        assert name in latex.CITE_COMMANDS
    assert "volcite" in latex.CITE_COMMANDS and "Volcites" in latex.MULTICITE_COMMANDS  # issue 24
    assert latex.MULTICITE_COMMANDS <= latex.CITE_COMMANDS
