"""BibTeX writer: keys, fields, TeX escaping, and parse(write(paper)) == paper for arbitrary text."""

from __future__ import annotations

import re
import unicodedata

import bibtexparser
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citewise.indexer.bibtex import iter_bibtex_text, split_authors
from citewise.indexer.bibtex_tex import balanced, source_to_tex
from citewise.indexer.bibtex_writer import (
    FIELD_PRESETS,
    bibtex_entry,
    first_word,
    format_entry,
    is_users_entry,
    make_key,
    tex_escape,
    tex_title,
    unique_key,
    usable_key,
)
from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store, StoredPaper
from citewise.indexer.tex_escape import char_to_tex, clean_verbatim
from citewise.indexer.tex_math import clean_math
from citewise.indexer.texclean import tex_to_unicode


def paper(**kw) -> StoredPaper:
    base = dict(
        title="Probabilistic FastText for Multi-Sense Word Embeddings",
        authors=["Athiwaratkun, Ben", "Wilson, Andrew", "Anandkumar, Anima"],
        year=2018,
        venue="Proceedings of ACL",
        entry_type="inproceedings",
        doi="10.18653/v1/P18-1001",
    )
    base.update(kw)
    return StoredPaper(**base)


def parse_one(text: str) -> tuple[str, str, dict[str, str]]:
    lib = bibtexparser.parse_string(text)
    assert not lib.failed_blocks, [b.error for b in lib.failed_blocks]
    (entry,) = lib.entries
    return entry.entry_type, entry.key, {k: v.value for k, v in entry.fields_dict.items()}


# -- original text --------------------------------------------------------------------------------


def test_original_bibtex_is_returned_unchanged() -> None:
    original = "@article{Smith:2020:Deep,\n  title = {{Deep} Things},\n  author = {Smith, A.}\n}"
    p = paper(bibtex=original)
    assert bibtex_entry(p) == ("Smith:2020:Deep", original + "\n")
    # Its key is in the user's file already: still that key, the caller decides.
    assert bibtex_entry(p, {"Smith:2020:Deep"})[0] == "Smith:2020:Deep"


# -- keys -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("style", "key"),
    [
        ("lastnameYEARfirstword", "athiwaratkun2018probabilistic"),
        ("authoryear", "athiwaratkun2018"),
        ("lastname_year", "athiwaratkun_2018"),
        ("acl", "athiwaratkun-etal-2018-probabilistic"),
        ("Lastname:yyFirstword", "Athiwaratkun:18Probabilistic"),
        ("google", "athiwaratkun2018probabilistic"),
    ],
)
def test_key_styles(style: str, key: str) -> None:
    assert make_key(paper(), style=style) == key


def test_key_parts() -> None:
    assert (
        make_key(paper(authors=["Müller, Jörg"], title="The Über-Model of Łódź"), style="acl")
        == "muller-2018-uber"
    )
    assert (
        make_key(paper(authors=["Straße, Ana", "Ødegård, Ø"]), style="acl")
        == "strasse-odegard-2018-probabilistic"
    )
    assert make_key(paper(authors=["Ada Lovelace"], year=None)) == "lovelaceprobabilistic"
    assert make_key(paper(authors=[], title="On the Use of a Thing")) == "anon2018use"
    assert make_key(paper(authors=[], year=None, title="")) == "anon"
    assert make_key(paper(authors=[], year=None, title=""), style="acl") == "anon"
    assert make_key(paper(authors=["李, 小龙"], title="中文")) == "anon2018"  # nothing ASCII to use
    assert first_word("A Study of the Art") == "study"
    assert first_word("The Of And") == "the"  # only stopwords: the first word


def test_keys_are_unique_against_existing() -> None:
    p = paper()
    assert make_key(p, {"athiwaratkun2018probabilistic"}) == "athiwaratkun2018probabilistica"
    taken = {"athiwaratkun2018probabilistic"} | {
        f"athiwaratkun2018probabilistic{c}" for c in "abcdefghijklmnopqrstuvwxyz"
    }
    assert make_key(p, taken) == "athiwaratkun2018probabilisticaa"
    assert (
        make_key(p, {"Athiwaratkun2018Probabilistic"}) == "athiwaratkun2018probabilistica"
    )  # BibTeX ignores case
    assert unique_key("k", set()) == "k"
    assert bibtex_entry(p, {"athiwaratkun2018probabilistic"})[1].startswith(
        "@inproceedings{athiwaratkun2018probabilistica,"
    )


def test_source_bibtex_key_wins() -> None:
    p = paper(extra={"bibtex_key": "smith2020deep"})
    assert make_key(p) == "smith2020deep"
    assert make_key(p, {"smith2020deep"}) == "smith2020deepa"
    assert make_key(paper(extra={"bibtex_key": "has space"})) == "athiwaratkun2018probabilistic"


# -- fields ---------------------------------------------------------------------------------------


def test_inproceedings_entry() -> None:
    p = paper(
        extra={
            "pages": "1–11",
            "publisher": "ACL",
            "month": "July",
            "url": "https://x.org/a_b%20c",
            "editor": "Gurevych, Iryna and Miyao, Yusuke",
            "bibtex_key": "x y",
            "Bad Field": "z",
        },
        keywords="word embeddings, fastText",
        abstract="We introduce it.",
    )
    key, text = bibtex_entry(p)
    assert key == "athiwaratkun2018probabilistic"
    etype, parsed_key, fields = parse_one(text)
    assert (etype, parsed_key) == ("inproceedings", key)
    assert fields["author"] == "Athiwaratkun, Ben and Wilson, Andrew and Anandkumar, Anima"
    assert fields["title"] == "Probabilistic {FastText} for Multi-Sense Word Embeddings"
    assert fields["booktitle"] == "Proceedings of ACL"
    assert fields["year"] == "2018"
    assert fields["pages"] == "1--11"
    assert fields["month"] == "jul"  # a macro, not a string
    assert "month = jul," in text
    assert fields["url"] == "https://x.org/a_b%20c"  # verbatim: no escaping inside URLs
    assert fields["doi"] == "10.18653/v1/p18-1001"
    assert fields["editor"] == "Gurevych, Iryna and Miyao, Yusuke"
    # Not in the default preset: abstract (build errors, bloat) and keywords.
    assert "abstract" not in fields and "keywords" not in fields
    assert "bibtex_key" not in fields and "Bad Field" not in text
    assert "abstract" in parse_one(bibtex_entry(p, include_abstract=True)[1])[2]
    full = parse_one(bibtex_entry(p, fields="full")[1])[2]
    assert full["keywords"] == "word embeddings, fastText" and full["abstract"] == "We introduce it."
    assert text.endswith("}\n") and text.count("\n  ") == len(fields)


@pytest.mark.parametrize(
    ("entry_type", "written", "venue_field"),
    [
        ("article", "article", "journal"),
        ("inproceedings", "inproceedings", "booktitle"),
        ("incollection", "incollection", "booktitle"),
        ("phdthesis", "phdthesis", "school"),
        ("techreport", "techreport", "institution"),
        ("misc", "misc", "howpublished"),
        ("journal-article", "misc", "howpublished"),
        ("", "misc", "howpublished"),
    ],
)
def test_venue_field_by_type(entry_type: str, written: str, venue_field: str) -> None:
    etype, _, fields = parse_one(bibtex_entry(paper(entry_type=entry_type, venue="Venue & Co"))[1])
    assert etype == written
    assert fields[venue_field] == r"Venue \& Co"


def test_extra_never_duplicates_a_field() -> None:
    p = paper(
        arxiv="2101.00001",
        extra={
            "doi": "10.1/other",
            "eprint": "x",
            "title": "t",
            "journal": "J",
            "month": "Sept.",
            "note": "mayonnaise",
        },
    )
    _, text = bibtex_entry(p)
    _, _, fields = parse_one(text)  # a repeated field would be a failed block
    assert fields["doi"] == "10.18653/v1/p18-1001" and fields["eprint"] == "2101.00001"
    assert fields["journal"] == "J" and fields["month"] == "sep" and fields["note"] == "mayonnaise"
    assert text.count("\n  title =") == 1


def test_arxiv_and_missing_fields() -> None:
    p = PaperRecord(title="Only a title", arxiv="arXiv:2101.00001v2")
    key, text = bibtex_entry(p)
    _, _, fields = parse_one(text)
    assert key == "anononly"
    assert fields == {"title": "Only a title", "eprint": "2101.00001", "archiveprefix": "arXiv"}


# -- TeX ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tex"),
    [
        ("a & b", r"a \& b"),
        ("50% of $5 #1 a_b", r"50\% of \$5 \#1 a\_b"),
        ("{x}", r"\textbraceleft{}x\textbraceright{}"),  # not \{: BibTeX counts that brace
        ("a<b>c|d", r"a\textless{}b\textgreater{}c\textbar{}d"),  # OT1 would print ¡ ¿
        ("~^\\", r"\textasciitilde{}\textasciicircum{}\textbackslash{}"),
        ("Café naïve", r"Caf{\'e} na{\"i}ve"),  # not {\"\i}: biber makes that a dotless i + accent
        ("Łódź Straße Ørsted", r"{\L}{\'o}d{\'z} Stra{\ss}e {\O}rsted"),
        ("Çağrı Šimko Dvořák", r"{\c{C}}a{\u{g}}r{\i} {\v{S}}imko Dvo{\v{r}}{\'a}k"),
        ("Guðrún Þór Đoàn", "Gudr{\\'u}n Th{\\'o}r Do{\\`a}n"),  # T1-only letters: OT1 has no \dh
        ("Wąsik ễ ứ ǖ", r"Wasik {\^e} {\'u} {\"u}"),  # one accent LaTeX's UTF-8 tables know
        ("ά Ω ℝ 𝒫 ﬁ", r"$\alpha$ {$\Omega$} {$\mathbf{R}$} {$\mathcal{P}$} fi"),
        ("© ™ ° « » ½", r"\textcopyright{} \texttrademark{} \textdegree{} `` '' \textonehalf{}"),
        ("α≤β and γ", r"$\alpha\leq\beta$ and $\gamma$"),
        ("x–y — z", r"x--y --- z"),
        ("a--b ``q'' “r”", r"a-{}-b `{}`q'{}' ``r''"),
        ("日本語 Д", "日本語 Д"),  # no pdfLaTeX spelling: kept as UTF-8 (XeLaTeX, LuaLaTeX, biber)
        ("a\u200bb\u0301", "ab"),  # invisible and stray combining characters
    ],
)
def test_tex_escape(text: str, tex: str) -> None:
    assert tex_escape(text) == tex


@pytest.mark.parametrize(
    ("title", "tex"),
    [
        (
            "BERT: Pre-training of Deep Bidirectional Transformers",
            "{BERT}: Pre-training of Deep Bidirectional Transformers",
        ),
        ("Probabilistic FastText", "Probabilistic {FastText}"),
        ("A Study of iPhone Use in 3D", "A Study of {iPhone} Use in {3D}"),
        ("Part B of What I Learned", "Part {B} of What {I} Learned"),
        ("ÉCOLE and Éric", r"{{\'E}COLE} and {\'E}ric"),
        ("GPT-3 & T5", r"{GPT}-3 \& {T5}"),
    ],
)
def test_title_capitals_are_protected(title: str, tex: str) -> None:
    assert tex_title(title) == tex


def test_authors_with_and_stay_one_person() -> None:
    _, text = bibtex_entry(paper(authors=["Barnes and Noble", "Smith, Ann"]))
    _, _, fields = parse_one(text)
    assert fields["author"] == "{Barnes and Noble} and Smith, Ann"
    assert split_authors(fields["author"]) == ["Barnes and Noble", "Smith, Ann"]


def test_round_trip_through_the_bibtex_importer() -> None:
    p = paper(
        title="Ünïcödé & Co: Łukasz's 100% $-free α-test — BERT_base {v2}",
        authors=["Müller, Jörg", "O'Brien, Seán", "van der Berg, Ælfred"],
        keywords="naïve, résumé",
        extra={"pages": "1–11", "publisher": "Ässociation & Co", "volume": "3"},
        entry_type="article",
        venue="Journal of Ñ",
    )
    _, text = bibtex_entry(p, fields="full")
    (rec,) = list(iter_bibtex_text(text, "mem.bib"))
    assert isinstance(rec, PaperRecord), rec
    assert rec.title == p.title
    assert rec.authors == p.authors
    assert (rec.year, rec.venue, rec.doi, rec.keywords, rec.entry_type) == (
        p.year,
        p.venue,
        p.doi,
        p.keywords,
        "article",
    )
    assert (
        rec.extra["pages"] == "1–11"
        and rec.extra["publisher"] == "Ässociation & Co"
        and rec.extra["volume"] == "3"
    )


def test_stored_paper_from_a_store(tmp_path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.import_source("mem", [paper(key="P18-1001", acl_id="P18-1001")], fmt="acl-xml")
    (stored,) = list(store.iter_papers())
    key, text = bibtex_entry(stored, {"other"}, "acl")
    assert key == "athiwaratkun-etal-2018-probabilistic"
    assert parse_one(text)[2]["doi"] == "10.18653/v1/p18-1001"


# -- round trips that once failed on the TeX -> Unicode side ------------------------------------------------------


def test_tilde_round_trips() -> None:
    assert tex_to_unicode(tex_escape("a~b")) == "a~b"


def test_literal_double_apostrophe_round_trips() -> None:
    assert tex_to_unicode(tex_escape("it''s")) == "it''s"


# -- property: parse(write(paper)) keeps every field -----------------------------------------------


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()


# Printable text from ASCII, Latin-1, Latin Extended-A/B, IPA, Greek, punctuation and symbols -- the
# characters the writer spells without loss. (The others it spells so that pdfLaTeX builds: ``ǖ`` as
# ``{\"u}``, ``ð`` as ``d``, Greek capitals like Latin ones as Latin; see test_tex_escape.)
_CHARS = st.characters(
    codec="utf-8", max_codepoint=0x3FF, categories=("L", "N", "P", "S", "Zs"), exclude_characters="~"
).filter(lambda c: tex_to_unicode(char_to_tex(c)) == c)
# Quote ligatures (TeX meaning) and HTML entities, which the importer decodes on purpose.
_UNSUPPORTED = re.compile(r"''|``|&[A-Za-z#0-9]")


def _text(min_size: int = 0, max_size: int = 60) -> st.SearchStrategy[str]:
    return (
        st.text(_CHARS, min_size=min_size, max_size=max_size)
        .map(norm)
        .filter(lambda s: len(s) >= min_size and not _UNSUPPORTED.search(s))
    )


_NAME_PART = st.text(
    st.characters(codec="utf-8", max_codepoint=0x24F, categories=("Lu", "Ll")).filter(
        lambda c: tex_to_unicode(char_to_tex(c)) == c
    ),
    min_size=1,
    max_size=12,
)
_NAME = st.one_of(
    st.builds(lambda last, first: f"{last}, {first}", _NAME_PART, _NAME_PART),
    st.builds(lambda a, b: f"{a} and {b}", _NAME_PART, _NAME_PART),  # a corporate name with "and"
    _NAME_PART,
)
_DOI = st.from_regex(r"10\.[0-9]{4,5}/[a-z0-9._;()/:\-]{1,20}", fullmatch=True)
_TYPES = st.sampled_from(["article", "inproceedings", "phdthesis"])


@st.composite
def records(draw: st.DrawFn) -> PaperRecord:
    return PaperRecord(
        # (ACM's "Session Details" records are skipped by the importer on purpose, not papers.)
        title=draw(_text(min_size=1).filter(lambda t: not norm(t).lower().startswith("session details"))),
        abstract=draw(_text()),
        authors=draw(st.lists(_NAME, max_size=4)),
        year=draw(st.one_of(st.none(), st.integers(1900, 2030))),
        venue=draw(_text()),
        entry_type=draw(_TYPES),
        keywords=", ".join(
            draw(st.lists(_text(min_size=1, max_size=15).filter(lambda s: "," not in s), max_size=3))
        ),
        doi=draw(st.one_of(st.just(""), _DOI)),
        extra={
            k: v
            for k, v in (("pages", draw(_text(max_size=10))), ("publisher", draw(_text(max_size=30))))
            if v
        },
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records(), st.sets(st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=30), max_size=5)
)
def test_parse_of_write_keeps_every_field(p: PaperRecord, existing: set[str]) -> None:
    key, text = bibtex_entry(p, existing, fields="full")
    assert key.lower() not in {k.lower() for k in existing}
    etype, parsed_key, fields = parse_one(text)
    assert (etype, parsed_key) == (p.entry_type, key)
    assert tex_to_unicode(fields["title"]) == norm(p.title)
    assert split_authors(fields.get("author", "")) == p.authors
    assert fields.get("year") == (str(p.year) if p.year else None)
    venue_field = {"article": "journal", "inproceedings": "booktitle", "phdthesis": "school"}[p.entry_type]
    assert tex_to_unicode(fields.get(venue_field, "")) == p.venue
    assert fields.get("doi", "") == p.doi
    assert tex_to_unicode(fields.get("keywords", "")) == p.keywords
    assert tex_to_unicode(fields.get("abstract", "")) == p.abstract
    for name, value in p.extra.items():
        if name == "pages":  # any run of dashes in a page range is one en dash (written --)
            value = re.sub(r" ?[\u2010-\u2015\u2212-]+ ?", "\u2013", " ".join(value.split()))
        assert tex_to_unicode(fields[name]) == value
    # The whole importer agrees too.
    (rec,) = list(iter_bibtex_text(text, "mem.bib"))
    assert isinstance(rec, PaperRecord), str(rec)
    assert (rec.title, rec.authors, rec.year, rec.doi, rec.keywords, rec.abstract) == (
        norm(p.title),
        p.authors,
        p.year,
        p.doi,
        p.keywords,
        p.abstract,
    )
    assert rec.venue == p.venue


# -- source TeX / HTML of bulk exports -> TeX that builds -----------------------------------------


@pytest.mark.parametrize(
    ("source", "tex"),
    [
        # HTML entities (once or twice encoded) and tags -> TeX
        ("Butterworth &amp; Co.", r"Butterworth \& Co."),
        ("a &lt; b &gt; c &#8211; d &nbsp;e", r"a \textless{} b \textgreater{} c -- d ~e"),
        ("&amp;lt;sup&amp;gt;x&amp;lt;/sup&amp;gt;", r"\textsuperscript{x}"),  # twice encoded: decoded twice
        ("&lt;sup&gt;3&lt;/sup&gt;", r"\textsuperscript{3}"),  # entity-escaped tags are tags
        (
            "x<sup>2</sup> H<sub>2</sub>O CO<inf>2</inf>",
            r"x\textsuperscript{2} H\textsubscript{2}O CO\textsubscript{2}",
        ),
        ("<i>a</i> <em>b</em> <italic>c</italic>", r"\textit{a} \textit{b} \textit{c}"),
        (
            "<b>a</b> <strong>b</strong> <scp>c</scp> <u>d</u>",
            r"\textbf{a} \textbf{b} \textsc{c} \underline{d}",
        ),
        ("<tt>code</tt> <span class='x'>s</span> one<br/>two <p>para</p>", r"\texttt{code} s one two para"),
        ('<inline-formula><tex-math notation="LaTeX">$M-1$</tex-math></inline-formula> mics', "$M-1$ mics"),
        ("<mml:math><mml:msup><mml:mi>x</mml:mi><mml:mn>2</mml:mn></mml:msup></mml:math>", "x2"),
        ("unclosed <i>italic", r"unclosed \textit{italic}"),  # tags are balanced by construction
        ("<i>a {b</i> c}", r"\textit{a {b c}}"),  # a close tag inside an open TeX group is ignored
        ("<k, v> pairs and <alpha>", r"\textless{}k, v\textgreater{} pairs and"),  # not tags / unknown tag
        # valid TeX is kept, not escaped twice
        (r"a \& b \% c \$ d \# e \_ f", r"a \& b \% c \$ d \# e \_ f"),
        (r"{\"u}ber Caf\'{e} na\"{\i}ve Fran\c{c}ois", r"{\"u}ber Caf{\'e} na{\"i}ve Fran{\c{c}}ois"),
        (r"Stra\ss e \o{} \L{}ukasz {\AA}str\"{o}m", r"Stra{\ss}e {\o} {\L}ukasz {\AA}str{\"o}m"),
        (r"Nguy\~{\^e}n", r"Nguy{\^e}n"),  # nested accents: one that LaTeX's UTF-8 tables know
        (r"{{BERT}}: Pre-training", "{{BERT}}: Pre-training"),
        (r"$x^2$ and $\alpha$-$\beta$ and $O(n \log n)$", r"$x^2$ and $\alpha$-$\beta$ and $O(n \log n)$"),
        (r"\textit{x} \emph{y} {\em z} {\bf w}", r"\textit{x} \emph{y} {\em z} {\bfseries w}"),
        (r"3\texttimes{}3, 1--2, a---b, ``q''", r"3$\times$3, 1--2, a---b, ``q''"),
        # TeX specials that are text -> escaped
        ("AT&T 100% #1 a_b x^y", r"AT\&T 100\% \#1 a\_b x\textasciicircum{}y"),
        (
            "www.x.tw/~d979/ in~cite (~58ms)",
            r"www.x.tw/\textasciitilde{}d979/ in~cite (\textasciitilde{}58ms)",
        ),
        ("back\\", r"back\textbackslash{}"),
        ("a } b { c", "a b { c}"),  # an unmatched } goes, an unclosed { is closed
        ("costs $5 only", r"costs \$5 only"),  # no closing dollar: text
        # commands outside the kernel -> kernel ones or their text
        (r"$\mathbb{R}^d$ $x \leqslant y$ $\left( x \right)$", r"$\mathbf{R}^d$ $x \leq y$ $( x )$"),
        (r"\url{http://a_b.org/%7E} \href{http://x}{text}", r"\texttt{http://a\_b.org/\%7E} {text}"),
        (r"\logn \cite{k} \LaTeX\hspace{1em}x", r"logn \LaTeX{} x"),
        (r"$x^2^3$", r"x\textasciicircum{}2\textasciicircum{}3"),  # double superscript: text
        (r"1–8 x\\y", "1--8 x y"),
    ],
)
def test_source_to_tex(source: str, tex: str) -> None:
    assert source_to_tex(source) == tex
    assert balanced(tex)


@pytest.mark.parametrize(
    ("title", "tex"),
    [
        (r"{BERT} for <i>iPhone</i> Users", r"{BERT} for \textit{iPhone} Users"),
        (r"$\Delta$-Learning in 3D", r"{$\Delta$}-Learning in {3D}"),  # change.case$ must not lower \Delta
        (r"Caf{\'E}s of {\'E}COLE", r"{Caf{\'E}s} of {{\'E}COLE}"),  # {\'E} is part of its word
        ("Deep &amp; Wide", r"Deep \& Wide"),
    ],
)
def test_source_titles_keep_their_capitals(title: str, tex: str) -> None:
    assert source_to_tex(title, title=True) == tex


@pytest.mark.parametrize(
    ("math", "clean"),
    [
        (r"x^2", "x^2"),
        (r"\frac12 + \sqrt[3]{x}", r"\frac{1}{2} + \sqrt[3]{x}"),
        (r"\mathbb{R}", r"\mathbf{R}"),
        (r"a \& b \{c\}", r"a \& b \lbrace c\rbrace"),  # \{ would unbalance the entry for BibTeX
        (r"a & b # c", r"a \& b \# c"),
        ("α ≤ β", r"\alpha  \leq  \beta"),
        (r"x^2^3", None),  # double superscript
        (r"x^", None),
        (r"\frac{1}", None),
        (r"\undefined", None),
        (r"<i>x</i>", None),
        (r"{x", None),
        ("x" * 3000, None),  # longer than any real formula: text instead
    ],
)
def test_clean_math(math: str, clean: str | None) -> None:
    assert clean_math(math) == clean


@pytest.mark.parametrize(
    ("value", "clean"),
    [
        ("https://x.org/a_b%20c#frag~u", "https://x.org/a_b%20c#frag~u"),  # verbatim: biblatex reads it so
        ("https://x.org/50% off", "https://x.org/50%25off"),  # a stray % is not a percent-escape
        ("https://x.org/#a#b", "https://x.org/#a%23b"),  # one fragment
        ("https://x.org/{a}\\b é", "https://x.org/%7Ba%7D%5Cb%C3%A9"),
        (
            "10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI4>3.0.CO;2-O",
            "10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI4>3.0.CO;2-O",
        ),
    ],
)
def test_urls_and_dois_stay_verbatim_but_safe(value: str, clean: str) -> None:
    assert clean_verbatim(value) == clean


@pytest.mark.parametrize(
    ("tex", "ok"),
    [
        ("a{b}c", True),
        ("a{b", False),
        ("a}b{", False),
        (r"\{", False),
        (r"\{\}", True),
        ("$x$", True),
        ("$x", False),
        (r"\$x", True),
        (r"a\\{b}", True),
    ],
)
def test_balanced_counts_braces_as_bibtex_does(tex: str, ok: bool) -> None:
    assert balanced(tex) is ok


# -- bulk exports vs the user's own library --------------------------------------------------------

ACM_ENTRY = """@inproceedings{10.1145/3336191.3371868,
author = {M\\"{u}ller, J\\"{o}rg and Smith, Ann},
title = {The H<sub>2</sub>O &amp; CO<sup>2</sup> of <i>Neural</i> Ranking: $O(n \\log n)$ {BERT}},
year = {2020},
isbn = {9781450368223},
publisher = {Association for Computing Machinery},
address = {New York, NY, USA},
url = {https://doi.org/10.1145/3336191.3371868},
doi = {10.1145/3336191.3371868},
abstract = {We show 50% gains &amp; more_stuff in $x^2$ time.},
booktitle = {Proceedings of the 13th International Conference on Web Search &amp; Data Mining},
pages = {1–8},
numpages = {8},
keywords = {ranking, <i>BERT</i>},
location = {Houston, TX, USA},
series = {WSDM '20}
}"""


def imported(text: str) -> PaperRecord:
    (rec,) = list(iter_bibtex_text(text, "library.bib"))
    assert isinstance(rec, PaperRecord), rec
    return rec


def test_an_acm_export_entry_becomes_a_clean_entry() -> None:
    rec = imported(ACM_ENTRY)
    assert not is_users_entry(rec)  # a DOI key and HTML: an export, not a library
    key, text = bibtex_entry(rec)
    assert key == "muller2020h2o"  # readable; "The" skipped; Müller -> muller
    etype, parsed_key, fields = parse_one(text)
    assert (etype, parsed_key) == ("inproceedings", key)
    assert fields["author"] == r"M{\"u}ller, J{\"o}rg and Smith, Ann"
    assert fields["title"] == (
        r"The {H}\textsubscript{2}{O} \& {CO}\textsuperscript{2} of \textit{Neural} "
        r"Ranking: {$O(n \log n)$} {BERT}"
    )
    assert (
        fields["booktitle"]
        == r"Proceedings of the 13th International Conference on Web Search \& Data Mining"
    )
    assert fields["pages"] == "1--8"
    assert fields["doi"] == "10.1145/3336191.3371868"
    # Default preset: no abstract, keywords, isbn, ACM's location/numpages; no url that repeats the DOI.
    assert set(fields) == {
        "author",
        "title",
        "booktitle",
        "year",
        "pages",
        "publisher",
        "address",
        "series",
        "doi",
    }
    full = parse_one(bibtex_entry(rec, fields="full")[1])[2]
    assert full["abstract"] == r"We show 50\% gains \& more\_stuff in $x^2$ time."
    assert full["keywords"] == r"ranking, \textit{BERT}"
    assert {"isbn", "location", "numpages"} <= set(
        full
    ) and "url" not in full  # a URL repeating the DOI: never


def test_the_users_own_entry_is_inserted_byte_for_byte() -> None:
    own = (
        "@article{Vaswani2017Attention,\n  title = {Attention Is All You {Need}},\n  note = {a % comment?}\n}"
    )
    rec = imported(own)
    assert is_users_entry(rec)
    assert bibtex_entry(rec) == ("Vaswani2017Attention", own + "\n")
    assert bibtex_entry(rec, {"vaswani2017attention"})[0] == "Vaswani2017Attention"  # the caller decides
    # The caller may know better: an entry of a bulk corpus that happens to look like a library's.
    assert bibtex_entry(rec, keep_original=False)[1].startswith("@article{Vaswani2017Attention,\n  title =")


def test_a_usable_key_of_an_export_is_kept_but_its_text_cleaned() -> None:
    rec = imported("@inproceedings{smith_2020, title = {Ranking &amp; <i>Search</i>}, year = 2020}")
    assert not is_users_entry(rec)
    key, text = bibtex_entry(rec)
    assert key == "smith_2020" and r"title = {Ranking \& \textit{Search}}" in text
    assert bibtex_entry(rec, {"SMITH_2020"})[0] == "anon2020ranking"  # taken: a key in the style
    # keep_original never inserts an unusable key
    doi_keyed = imported("@misc{10.1/x y, title = {T}}") if False else imported("@misc{10.1/xy, title = {T}}")
    assert bibtex_entry(doi_keyed, keep_original=True)[0] == "anont"


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("vaswani2017attention", True),
        ("Vaswani2017Attention", True),
        ("smith_2020", True),
        ("Smith:2020:Deep", True),
        ("P18-1001", True),
        ("10.1145/3336191.3371868", False),
        ("10.1145.3336191", False),
        ("has space", False),
        ("a#b", False),
        ("a%b", False),
        ("a,b", False),
        ("a{b}", False),
        ("a~b", False),
        ("a\\b", False),
        ('a"b', False),
        ("a'b", False),
        ("müller2020", False),
        ("", False),
        ("-x", False),
        ("x" * 101, False),
    ],
)
def test_usable_keys(key: str, ok: bool) -> None:
    assert usable_key(key) is ok


@pytest.mark.parametrize(
    ("title", "authors", "key"),
    [
        ("Attention Is All You Need", ["Vaswani, Ashish"], "vaswani2017attention"),
        ("The Art of the Deal", ["Müller, Jörg"], "muller2017art"),  # accents folded, stop words skipped
        ("On a Theory of Ænigma", ["Ødegård, Øystein"], "odegard2017theory"),
        ("Über Straße", ["Łukasz Nowak"], "nowak2017uber"),  # "First Last": last word
        ("A the of", ["de la Cruz, María"], "delacruz2017a"),  # only stop words: the first word
    ],
)
def test_default_key_style(title: str, authors: list[str], key: str) -> None:
    assert make_key(PaperRecord(title, authors=authors, year=2017)) == key


def test_field_presets() -> None:
    p = paper(
        abstract="A.", keywords="k", extra={"pages": "1-2", "isbn": "978", "publisher": "P", "note": "n"}
    )
    names = lambda text: set(parse_one(text)[2])  # noqa: E731
    assert names(format_entry(p, "k", fields="minimal")) == {
        "author",
        "title",
        "booktitle",
        "year",
        "pages",
        "doi",
    }
    assert names(format_entry(p, "k")) == {
        "author",
        "title",
        "booktitle",
        "year",
        "pages",
        "publisher",
        "note",
        "doi",
    }
    assert {"abstract", "keywords", "isbn"} <= names(format_entry(p, "k", fields="full"))
    assert names(format_entry(p, "k", fields=("title", "year"))) == {"title", "year"}
    assert names(format_entry(p, "k", True, fields=("title",))) == {"title", "abstract"}
    assert FIELD_PRESETS["full"] is None
    with pytest.raises(ValueError, match="unknown BibTeX field preset"):
        format_entry(p, "k", fields="everything")


def test_a_field_that_would_unbalance_the_entry_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    from citewise.indexer import bibtex_writer

    monkeypatch.setattr(bibtex_writer, "clean_verbatim", lambda value: "a{b")
    _, _, fields = parse_one(bibtex_entry(paper())[1])
    assert "doi" not in fields and fields["title"]


# -- property: any stored record -> an entry BibTeX tools read back --------------------------------

_ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_MARKUP_TEXT = st.lists(
    st.one_of(
        _ANY_TEXT,
        st.sampled_from(
            [
                "&amp;",
                "&lt;",
                "&#8211;",
                "<sup>",
                "</sup>",
                "<i>",
                "</i>",
                "<scp>",
                "<tex-math>",
                "$",
                "$$",
                "{",
                "}",
                "\\",
                "\\&",
                "\\'",
                "\\c",
                "\\frac",
                "\\mathbb{R}",
                "^",
                "_",
                "~",
                "%",
                "#",
                "--",
                "``",
                "''",
                "\\\\",
                "{\\em",
                "\\url{",
                " and ",
                ",",
            ]
        ),
    ),
    max_size=12,
).map("".join)


@st.composite
def any_records(draw: st.DrawFn) -> PaperRecord:
    return PaperRecord(
        title=draw(_MARKUP_TEXT.filter(lambda t: t.strip())),
        abstract=draw(_MARKUP_TEXT),
        authors=draw(st.lists(_MARKUP_TEXT.filter(lambda t: t.strip()), max_size=3)),
        year=draw(st.one_of(st.none(), st.integers(1, 9999))),
        venue=draw(_MARKUP_TEXT),
        entry_type=draw(st.sampled_from(["article", "inproceedings", "misc", "phdthesis", "weird"])),
        keywords=draw(_MARKUP_TEXT),
        doi=draw(_MARKUP_TEXT),
        arxiv=draw(_MARKUP_TEXT),
        bibtex=draw(st.one_of(st.just(""), _MARKUP_TEXT)),
        extra=draw(
            st.dictionaries(
                st.sampled_from(
                    [
                        "pages",
                        "url",
                        "month",
                        "editor",
                        "publisher",
                        "note",
                        "isbn",
                        "Bad Field",
                        "bibtex_key",
                    ]
                ),
                _MARKUP_TEXT,
                max_size=5,
            )
        ),
    )


def _check_entry(key: str, text: str) -> None:
    written = re.findall(r"^  ([a-z][a-z0-9_\-]*) = (.*?),?$", text, re.M)
    assert all(balanced(value) for _, value in written), text
    assert text.count("{") == text.count("}"), text  # as BibTeX counts them
    lib = bibtexparser.parse_string(text)
    assert not lib.failed_blocks, (text, [b.error for b in lib.failed_blocks])
    (entry,) = lib.entries
    assert entry.key == key
    assert sorted(entry.fields_dict) == sorted(name for name, _ in written)  # nothing lost or merged


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    any_records(),
    st.sets(st.text(min_size=1, max_size=10), max_size=3),
    st.sampled_from(["minimal", "standard", "full"]),
)
def test_any_record_gives_an_entry_that_parses_back(p: PaperRecord, existing: set[str], fields: str) -> None:
    key, text = bibtex_entry(p, existing, fields=fields)
    if is_users_entry(p):
        assert text == p.bibtex.strip() + "\n"
        return
    assert usable_key(key) and key.lower() not in {k.lower() for k in existing}
    _check_entry(key, text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "title",
                "author",
                "booktitle",
                "journal",
                "publisher",
                "pages",
                "abstract",
                "keywords",
                "editor",
                "url",
                "note",
                "series",
            ]
        ),
        _MARKUP_TEXT.map(lambda t: t.replace("{", "").replace("}", "").replace("@", "")),
        min_size=1,
    )
)
def test_any_imported_export_gives_an_entry_that_parses_back(values: dict[str, str]) -> None:
    """ACM-like exports (DOI key, fields with HTML and TeX) through the real importer and the writer."""
    body = ",\n".join(f"{name} = {{{value}}}" for name, value in values.items())
    records = [
        r
        for r in iter_bibtex_text(f"@inproceedings{{10.1145/1.2,\n{body}\n}}", "x.bib")
        if isinstance(r, PaperRecord)
    ]
    for rec in records:
        key, text = bibtex_entry(rec, fields="full")
        _check_entry(key, text)


# -- adversarial input: every scan is linear --------------------------------------------------------

_HOSTILE_100K = {
    "backslashes": "\\" * 100_000,
    "open braces": "{" * 100_000,
    "close braces": "}" * 100_000,
    "dollars": "$" * 100_000,
    "dollar pairs with text": "$x " * 33_000,
    "unclosed url": "\\url{" * 20_000,
    "unclosed accents": "\\'{" * 30_000,
    "tags": "<i>" * 33_000,
    "unclosed tags": "<a x" * 25_000,
    "entities": "&amp;" * 20_000,
    "half entities": "&amp" * 25_000,
    "math runs": "$" + "x^{" * 30_000 + "$",
    "tildes and carets": "~^_" * 33_000,
    "commands": "\\foo" * 25_000,
    "spaces": " " * 100_000,
    "dashes and spaces": "- " * 50_000,
    "at signs": "@a{" * 33_000,
}


@pytest.mark.parametrize("name", list(_HOSTILE_100K))
def test_hostile_100k_fields_are_written_in_linear_time(name: str) -> None:
    import time

    text = _HOSTILE_100K[name]
    record = PaperRecord(
        title=text,
        authors=[text],
        venue=text,
        extra={"pages": text, "url": text, "note": text},
        bibtex=f"@article{{{text},\n title = {{{text}}}\n}}",
    )
    start = time.perf_counter()
    source_to_tex(text, title=True)
    key, entry = bibtex_entry(record, fields="full")
    elapsed = time.perf_counter() - start
    assert elapsed < 10, f"{name}: {elapsed:.1f} s"  # generous: it exists to catch quadratic cases
    assert entry.count("{") == entry.count("}")


def test_a_unicode_digit_month_is_not_a_month() -> None:
    """Found by the property test in CI: ``month = {¹}`` made the writer raise."""
    from citewise.indexer.bibtex_writer import _month

    assert _month("¹") is None and _month("７") is None and _month("07") == "jul"
