"""Table tests for the Markdown side (Pandoc, Quarto, R Markdown) of draft reading.

Fixtures are inline; ``|`` marks the cursor (tests that need a literal ``|`` build the text
without a cursor).
"""

from __future__ import annotations

import pytest

from citewise.server import markdown
from citewise.server.draft import (
    bibliography_files,
    citation_at,
    find_citations,
    global_context,
    is_placeholder_token,
    local_context,
    placeholders,
)


def cursor(src: str) -> tuple[str, int]:
    off = src.index("|")
    return src[:off] + src[off + 1 :], off


def found(text: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(c.command, tuple(k.key for k in c.keys)) for c in find_citations(text, "markdown")]


B = "[@]"  # bracketed citation
T = "@"  # in-text citation

FIND_CASES: list[tuple[str, list[tuple[str, tuple[str, ...]]]]] = [
    # bracketed
    ("[@key]", [(B, ("key",))]),
    ("Text [@key].", [(B, ("key",))]),
    ("[@a; @b]", [(B, ("a", "b"))]),
    ("[@a;@b]", [(B, ("a", "b"))]),
    ("[@a; @b; @c]", [(B, ("a", "b", "c"))]),
    ("[-@a]", [(B, ("a",))]),
    ("[@a; -@b]", [(B, ("a", "b"))]),
    ("[see @a, p. 3]", [(B, ("a",))]),
    ("[see @a, pp. 33-35; also @b, chap. 1]", [(B, ("a", "b"))]),
    ("[*see* @a]", [(B, ("a",))]),
    ("[ @a ]", [(B, ("a",))]),
    ("[@a, p. 3; @b]", [(B, ("a", "b"))]),
    ("[@a;\n@b]", [(B, ("a", "b"))]),
    ("[@{https://x.org/bib?a=b&c=d}]", [(B, ("https://x.org/bib?a=b&c=d",))]),
    ("[@a]{.class}", [(B, ("a",))]),
    # key shapes
    ("[@smith2020Deep]", [(B, ("smith2020Deep",))]),
    ("[@Smith_2020]", [(B, ("Smith_2020",))]),
    ("[@doe:2019:abc]", [(B, ("doe:2019:abc",))]),
    ("[@10.1145/3331184.3331211]", [(B, ("10.1145/3331184.3331211",))]),
    ("[@_under]", [(B, ("_under",))]),
    ("[@müller2021]", [(B, ("müller2021",))]),
    ("[@a-b+c#d$e%f&g?h<i>j~k/l]", [(B, ("a-b+c#d$e%f&g?h<i>j~k/l",))]),
    # in-text
    ("@key says", [(T, ("key",))]),
    ("As @smith2020 says", [(T, ("smith2020",))]),
    ("@smith2020 [p. 33] says", [(T, ("smith2020",))]),
    ("(@doe99)", [(T, ("doe99",))]),
    ("see @doe99.", [(T, ("doe99",))]),
    ("see @doe99, and", [(T, ("doe99",))]),
    ("see @doe99: and", [(T, ("doe99",))]),
    ("see @doe99's work", [(T, ("doe99",))]),
    ("@doe:2019:abc.", [(T, ("doe:2019:abc",))]),
    ("@10.1145/3331184.3331211 shows", [(T, ("10.1145/3331184.3331211",))]),
    ("*@a*", [(T, ("a",))]),
    ("@{braced key} says", [(T, ("braced key",))]),
    ("@a and @b", [(T, ("a",)), (T, ("b",))]),
    ("[@a] and @b", [(B, ("a",)), (T, ("b",))]),
    ("@b and [@a]", [(T, ("b",)), (B, ("a",))]),
    ("[@a\n\n@b]", [(T, ("a",)), (T, ("b",))]),  # a bracket cannot span paragraphs
    ("[@a; @smi", [(T, ("a",)), (T, ("smi",))]),  # unclosed: read as in-text while typing
    # placeholders
    ("[@]", [(B, ("",))]),
    ("[@ ]", [(B, ("",))]),
    ("[@?]", [(B, ("?",))]),
    ("[@??]", [(B, ("??",))]),
    ("[@TODO]", [(B, ("TODO",))]),
    ("[@XXX]", [(B, ("XXX",))]),
    ("[see @]", [(B, ("",))]),
    ("[@a; ]", [(B, ("a", ""))]),
    ("[@a;]", [(B, ("a", ""))]),
    ("[@a; @]", [(B, ("a", ""))]),
    ("[@a; @?]", [(B, ("a", "?"))]),
    ("@TODO here", [(T, ("TODO",))]),
    # not citations: mail, URLs, escapes, code, metadata
    ("me@example.com", []),
    ("<me@example.com>", []),
    ("mailto:me@example.com", []),
    ("[mail me@example.com]", []),
    ("https://medium.com/@user", []),
    ("http://x.org/a=@b", []),
    (r"\@x", []),
    ("a.@x", []),
    ("a-@x", []),
    ("`@x`", []),
    ("`` a ` @x ``", []),
    ("text `[@a]` text", []),
    ("```\n@x [@y]\n```", []),
    ("```python\n@decorator\ndef f(): pass\n```\n@after", [(T, ("after",))]),
    ("~~~\n@x\n~~~", []),
    ("````\n```\n@x\n```\n````", []),
    ("```{r}\n@x\n```", []),
    ("   ```\n@x\n   ```", []),
    ("```\n@x unclosed fence", []),
    ("<!-- @x [@y] -->", []),
    ("<!-- @x", []),
    ("---\ntitle: T\nauthor: '@me'\n---\n@a", [(T, ("a",))]),
    ("---\nauthor: '@me'\n...\n", []),
    ("@", []),
    ("@ x", []),
    ("[@ see]", []),
    ("[email @ work]", []),
    ("[text](http://x.org/@a)", []),
    ("[]", []),
    ("", []),
    # Quarto / pandoc-crossref cross-references
    ("@fig-x", []),
    ("See @fig-plot.", []),
    ("@tbl-x", []),
    ("@sec-x", []),
    ("@eq-x", []),
    ("@lst-x @thm-x @lem-x @def-x", []),
    ("@fig:x @sec:intro @eq:1", []),
    ("[@fig-x]", []),
    ("[@fig-x; @tbl-y]", []),
    ("[@fig-x; @smith]", [(B, ("smith",))]),
    ("@figure2020", [(T, ("figure2020",))]),
    ("@secret", [(T, ("secret",))]),
    # an unclosed code span is literal backticks
    ("`@x", [(T, ("x",))]),
]


@pytest.mark.parametrize(("text", "expected"), FIND_CASES)
def test_find_citations(text: str, expected: list[tuple[str, tuple[str, ...]]]) -> None:
    assert found(text) == expected
    for c in find_citations(text, "markdown"):
        assert 0 <= c.start < c.end <= len(text)
        for k in c.keys:
            assert text[k.start : k.end] == k.key
            assert k.placeholder == is_placeholder_token(k.key.strip())


def test_bracket_group_range() -> None:
    text = "Text [see @a, p. 3; @b] more"
    (c,) = find_citations(text, "markdown")
    assert text[c.start : c.end] == "[see @a, p. 3; @b]"
    assert c.groups == ((c.start, c.end),)
    text = "As @a says"
    (c,) = find_citations(text, "markdown")
    assert c.groups == () and text[c.start : c.end] == "@a"


# --------------------------------------------------------------------------------------------
# placeholders
# --------------------------------------------------------------------------------------------

PLACEHOLDER_CASES: list[tuple[str, str]] = [
    ("x [@] y", "x [@K] y"),
    ("x [@ ] y", "x [@K ] y"),
    ("x [@?] y", "x [@K] y"),
    ("x [@??] y", "x [@K] y"),
    ("x [@TODO] y", "x [@K] y"),
    ("x [@XXX] y", "x [@K] y"),
    ("x [see @?, p. 3] y", "x [see @K, p. 3] y"),
    ("x [@a; ] y", "x [@a; @K] y"),
    ("x [@a;] y", "x [@a; @K] y"),
    ("x [@a; @] y", "x [@a; @K] y"),
    ("x [-@?] y", "x [-@K] y"),
    ("x @TODO y", "x @K y"),
]


@pytest.mark.parametrize(("src", "filled"), PLACEHOLDER_CASES)
def test_placeholders(src: str, filled: str) -> None:
    (p,) = placeholders(src, "markdown")
    assert src[: p.start] + p.replacement("K") + src[p.end :] == filled
    assert p.context == "x y"


@pytest.mark.parametrize("text", ["[@a]", "@a", "[@a; @b]", "[email @ work]", "`[@]`", "me@?", "[@a; see]"])
def test_no_placeholders(text: str) -> None:
    assert placeholders(text, "markdown") == []


def test_several_placeholders_in_order() -> None:
    text = "One [@?] two [@a; ] three [@TODO]."
    assert [p.token for p in placeholders(text, "markdown")] == ["?", "", "TODO"]


# --------------------------------------------------------------------------------------------
# citation_at
# --------------------------------------------------------------------------------------------

# (source with cursor, text after choosing "K", prefix, placeholder)
CURSOR_CASES: list[tuple[str, str, str, bool]] = [
    ("[@|]", "[@K]", "", True),
    ("[@sm|]", "[@K]", "sm", False),
    ("[@sm|ith]", "[@K]", "sm", False),
    ("[@|smith]", "[@K]", "", False),
    ("[@a; @b|]", "[@a; @K]", "b", False),
    ("[@a|; @b]", "[@K; @b]", "a", False),
    ("[@a; |]", "[@a; @K]", "", True),
    ("[@a;|]", "[@a; @K]", "", True),
    ("[@a; | ]", "[@a; @K ]", "", True),
    ("[@a; @|]", "[@a; @K]", "", True),
    ("[see @sm|, p. 3]", "[see @K, p. 3]", "sm", False),
    ("[-@sm|]", "[-@K]", "sm", False),
    ("[@?|]", "[@K]", "", True),
    ("[@|?]", "[@K]", "", True),
    ("[@TODO|]", "[@K]", "", True),
    ("[@doe:2019:|abc]", "[@K]", "doe:2019:", False),
    ("[@10.1145/|3331184]", "[@K]", "10.1145/", False),
    ("[@{sm|}]", "[@{K}]", "sm", False),
    ("@sm| says", "@K says", "sm", False),
    ("@smith| says", "@K says", "smith", False),
    ("As @| says", "As @K says", "", True),
    ("@|", "@K", "", True),
    ("(@|)", "(@K)", "", True),
    ("[@|", "[@K", "", True),
    ("[@a; @|", "[@a; @K", "", True),
    ("[@a; @sm|", "[@a; @K", "sm", False),
    ("@{sm|} says", "@{K} says", "sm", False),
    ("[@a]\n\nAs @| says", "[@a]\n\nAs @K says", "", True),
    ("---\ntitle: T\n---\nText [@|]", "---\ntitle: T\n---\nText [@K]", "", True),
]


@pytest.mark.parametrize(("src", "after", "prefix", "placeholder"), CURSOR_CASES)
def test_citation_at(src: str, after: str, prefix: str, placeholder: bool) -> None:
    text, off = cursor(src)
    cc = citation_at(text, off, "markdown")
    assert cc is not None
    assert cc.start <= off <= cc.end
    assert "\n" not in text[cc.start : cc.end]
    assert text[: cc.start] + cc.replacement("K") + text[cc.end :] == after
    assert cc.prefix == prefix
    assert cc.placeholder is placeholder
    assert cc.typed == text[cc.start : off]


NO_CURSOR_CASES = [
    "me@|",
    "me@ex|ample.com",
    "`@|`",
    "`@sm|`",
    "```\n@|\n```",
    "<!-- @| -->",
    "---\nkey: @|\n---\n",
    "[see| @a]",
    "[|@a]",
    "[@a, p. 3|]",
    "[@a]|",
    "|[@a]",
    "@fig-|x",
    "[@ |]",
    "plain |text",
    "|",
    "https://x.org/@|",
]


@pytest.mark.parametrize("src", NO_CURSOR_CASES)
def test_citation_at_outside_key_slots(src: str) -> None:
    text, off = cursor(src)
    assert citation_at(text, off, "markdown") is None


def test_citation_at_bare_at_is_synthesised() -> None:
    text, off = cursor("As @| says")
    cc = citation_at(text, off, "markdown")
    assert cc is not None
    assert cc.citation.command == "@" and not cc.citation.closed
    assert cc.citation.keys[0].start == off
    assert find_citations(text, "markdown") == []  # a lone "@" is not a citation on its own


# --------------------------------------------------------------------------------------------
# local_context
# --------------------------------------------------------------------------------------------

LOCAL_CASES: list[tuple[str, str]] = [
    ("Deep nets [@|] work.", "Deep nets work."),
    ("Deep nets [@a; @|] work.", "Deep nets work."),
    ("As @smith says, deep nets [@?|] work [@b].", "As says, deep nets work."),
    ("**Deep** _nets_ [@|]", "Deep nets"),
    ("*Deep* __nets__ [@|]", "Deep nets"),
    ("snake_case words [@|]", "snake_case words"),
    ("See [the docs](http://x.org) [@|]", "See the docs"),
    ("See [the docs][ref] [@|]", "See the docs"),
    ("![A figure](x.png) shows [@|]", "A figure shows"),
    ("Use `code` here [@|]", "Use here"),
    ("## Heading\n\nText [@|]", "Heading Text"),
    ("# Intro {#sec-intro}\n\nText [@|]", "Intro Text"),
    ("As in @fig-x, text [@|]", "As in, text"),
    ("- item one\n- item two [@|]", "item one item two"),
    ("1. item one\n2. item two [@|]", "item one item two"),
    ("> quoted text [@|]", "quoted text"),
    ("Math $x^2$ here [@|]", "Math x^2 here"),
    ("Math $\\alpha$ here [@|]", "Math here"),
    ("---\ntitle: Meta\n---\nText [@|]", "Text"),
    ("```\ncode block\n```\nText [@|]", "Text"),
    ("<!-- hidden -->Text [@|]", "Text"),
    ("Text[^1] more [@|]", "Text more"),
    ("Text^[a footnote] more [@|]", "Text a footnote more"),
    ("Visit <https://x.org> now [@|]", "Visit now"),
    ("A <span>tagged</span> word [@|]", "A tagged word"),
    ("::: {.callout}\nInside [@|]\n:::", "Inside"),
    ("Escaped \\* star [@|]", "Escaped star"),
    ("@sm| says", "says"),
    ("Deep nets work|", "Deep nets work"),
]


@pytest.mark.parametrize(("src", "expected"), LOCAL_CASES)
def test_local_context(src: str, expected: str) -> None:
    text, off = cursor(src)
    assert local_context(text, off, "markdown") == expected


def test_local_context_pipe_tables() -> None:
    text = "| a | b |\n|---|---|\n| deep | nets |\n\nText [@?]"
    assert local_context(text, text.index("?"), "markdown") == "a b --- --- deep nets Text"


def test_local_context_size() -> None:
    text = " ".join(f"w{i}" for i in range(500)) + " [@?] " + " ".join(f"v{i}" for i in range(500))
    ctx = local_context(text, text.index("?"), "markdown", size=150)
    assert 135 <= len(ctx) <= 150
    assert "w499 v0" in ctx


# --------------------------------------------------------------------------------------------
# global_context
# --------------------------------------------------------------------------------------------

GLOBAL_CASES: list[tuple[str, tuple[str, str]]] = [
    ("---\ntitle: Plain Title\n---\n", ("Plain Title", "")),
    ('---\ntitle: "Quoted: with colon"\n---\n', ("Quoted: with colon", "")),
    ("---\ntitle: 'It''s single'\n---\n", ("It's single", "")),
    ('---\ntitle: "Escaped \\"quote\\""\n---\n', ('Escaped "quote"', "")),
    ("---\ntitle: Title # a comment\n---\n", ("Title", "")),
    ("---\ntitle: >\n  Folded\n  title\n---\n", ("Folded title", "")),
    ("---\ntitle: |\n  Literal\n  title\n---\n", ("Literal title", "")),
    ("---\ntitle: Plain\n  continued\n---\n", ("Plain continued", "")),
    ('---\ntitle: "Quoted\n  continued"\n---\n', ("Quoted continued", "")),
    ("---\ntitle: '*Deep* [Learning](x)'\n---\n", ("Deep Learning", "")),
    ("---\ntitle:\n  text: nested\n---\n", ("", "")),
    ("\ufeff---\ntitle: BOM\n---\n", ("BOM", "")),
    ("---\r\ntitle: CRLF\r\nabstract: Text\r\n---\r\n", ("CRLF", "Text")),
    ("---\ntitle: Dots\n...\n", ("Dots", "")),
    ("---\nauthor: A\n---\n", ("", "")),
    ("---\n\ntitle: not front matter\n---\n", ("", "")),
    ("Intro\n---\ntitle: Late\n---\n", ("", "")),
    ("---\ntitle: Unclosed\n", ("", "")),
    (
        "---\ntitle: T\nabstract: |\n  We study citation\n  recommendation [@a; @b].\n\n  Second paragraph.\n---\n",
        ("T", "We study citation recommendation. Second paragraph."),
    ),
    (
        "---\nabstract: >-\n  Folded\n  abstract\n\n  Para two\nkeywords: [a, b]\n---\n",
        ("", "Folded abstract Para two"),
    ),
    ("---\nabstract: |2\n    Indented\n---\n", ("", "Indented")),
    ('---\nabstract: "One line with `code` and $x$"\n---\n', ("", "One line with and x")),
    ("---\nabstract: Plain multi\n  line abstract\n---\n", ("", "Plain multi line abstract")),
    ("---\ntitle: T\nabstract:\n---\n", ("T", "")),
    ("---\ntitle: T\ntitle: Second\n---\n", ("T", "")),
    ("% Pandoc Title\n% Author\n\nText", ("Pandoc Title", "")),
    ("# Heading Title\n\nText", ("Heading Title", "")),
    ("## Not a title\n\nText", ("", "")),
    ("Text first\n\n# Late heading", ("", "")),
    ("# T\n\n## Abstract\n\nThe abstract [@x].\n\n## Intro\n\nBody", ("T", "The abstract.")),
    ("# T\n\n# Abstract {.unnumbered}\n\nShort.\n\n## Sub\n\nStill.\n\n# Next", ("T", "Short. Sub Still.")),
    ("```\n# Abstract\n```\nBody", ("", "")),
    ("", ("", "")),
]


@pytest.mark.parametrize(("text", "expected"), GLOBAL_CASES)
def test_global_context(text: str, expected: tuple[str, str]) -> None:
    assert global_context(text, "markdown") == expected


# --------------------------------------------------------------------------------------------
# bibliography_files and the front-matter reader
# --------------------------------------------------------------------------------------------

BIB_CASES: list[tuple[str, list[str]]] = [
    ("---\nbibliography: refs.bib\n---\n", ["refs.bib"]),
    ('---\nbibliography: "refs.bib"\n---\n', ["refs.bib"]),
    ("---\nbibliography: refs.bib # main\n---\n", ["refs.bib"]),
    ("---\nbibliography: [a.bib, 'b.bib', \"c.bib\"]\n---\n", ["a.bib", "b.bib", "c.bib"]),
    ("---\nbibliography:\n  - a.bib\n  - b.bib\n---\n", ["a.bib", "b.bib"]),
    ("---\nbibliography:\n- a.bib\n- b.bib\ntitle: T\n---\n", ["a.bib", "b.bib"]),
    ("---\nbibliography:\n  - a.bib\n  - a.bib\n---\n", ["a.bib"]),
    ("---\nbibliography: ../shared/refs.bib\n---\n", ["../shared/refs.bib"]),
    ("---\nbibliography: https://x.org/refs.bib\n---\n", []),
    ("---\ntitle: T\n---\n", []),
    ("bibliography: refs.bib\n", []),
    ("", []),
]


@pytest.mark.parametrize(("text", "expected"), BIB_CASES)
def test_bibliography_files(text: str, expected: list[str]) -> None:
    assert bibliography_files(text, "markdown") == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("a: 1\nb: two words", {"a": "1", "b": "two words"}),
        ("a:\n  - x\n  - y", {"a": ["x", "y"]}),
        ("a: [x, y]", {"a": ["x", "y"]}),
        ("a: []", {"a": []}),
        ("a:", {"a": None}),
        ("a: |\n  x\n\n  y\n", {"a": "x\n\ny"}),
        ("a: >\n  x\n  y\n\n  z", {"a": "x y\nz"}),
        ("a: &anchor x", {"a": None}),
        ("a: {b: c}", {"a": None}),
        ('"quoted key": v', {"quoted key": "v"}),
        ("# comment\na: v", {"a": "v"}),
        ("  indented: ignored\na: v", {"a": "v"}),
        ("not yaml at all", {}),
        ("a: 'x' trailing", {"a": "x"}),
        ("a: 'unterminated", {"a": "unterminated"}),
        ('a: "esc\\n\\t\\\\"', {"a": "esc\n\t\\"}),
    ],
)
def test_parse_front_matter(body: str, expected: dict[str, object]) -> None:
    assert markdown.parse_front_matter(body) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("fig-x", True),
        ("tbl-a", True),
        ("sec:intro", True),
        ("eq-1", True),
        ("thm-main", True),
        ("figure", False),
        ("fig", False),
        ("smith2020", False),
        ("secret-x", False),
        ("def:x", False),
    ],
)
def test_is_crossref(key: str, expected: bool) -> None:
    assert markdown.is_crossref(key) is expected
