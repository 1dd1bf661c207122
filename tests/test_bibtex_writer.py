"""BibTeX writer: keys, fields, TeX escaping, and parse(write(paper)) == paper for arbitrary text."""

from __future__ import annotations

import re
import unicodedata

import bibtexparser
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citewise.indexer.bibtex import iter_bibtex_text, split_authors
from citewise.indexer.bibtex_writer import (
    bibtex_entry,
    first_word,
    make_key,
    tex_escape,
    tex_title,
    unique_key,
)
from citewise.indexer.records import PaperRecord
from citewise.indexer.store import Store, StoredPaper
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
    assert make_key(paper(authors=["Müller, Jörg"], title="The Über-Model of Łódź"), style="acl") == "muller-2018-uber"
    assert make_key(paper(authors=["Straße, Ana", "Ødegård, Ø"]), style="acl") == "strasse-odegard-2018-probabilistic"
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
    taken = {"athiwaratkun2018probabilistic"} | {f"athiwaratkun2018probabilistic{c}" for c in "abcdefghijklmnopqrstuvwxyz"}
    assert make_key(p, taken) == "athiwaratkun2018probabilisticaa"
    assert make_key(p, {"Athiwaratkun2018Probabilistic"}) == "athiwaratkun2018probabilistica"  # BibTeX ignores case
    assert unique_key("k", set()) == "k"
    assert bibtex_entry(p, {"athiwaratkun2018probabilistic"})[1].startswith("@inproceedings{athiwaratkun2018probabilistica,")


def test_source_bibtex_key_wins() -> None:
    p = paper(extra={"bibtex_key": "smith2020deep"})
    assert make_key(p) == "smith2020deep"
    assert make_key(p, {"smith2020deep"}) == "smith2020deepa"
    assert make_key(paper(extra={"bibtex_key": "has space"})) == "athiwaratkun2018probabilistic"


# -- fields ---------------------------------------------------------------------------------------


def test_inproceedings_entry() -> None:
    p = paper(extra={"pages": "1–11", "publisher": "ACL", "month": "July", "url": "https://x.org/a_b%20c",
                     "editor": "Gurevych, Iryna and Miyao, Yusuke", "bibtex_key": "x y", "Bad Field": "z"},
              keywords="word embeddings, fastText", abstract="We introduce it.")
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
    assert fields["keywords"] == "word embeddings, fastText"
    assert "abstract" not in fields and "bibtex_key" not in fields and "Bad Field" not in text
    assert "abstract" in parse_one(bibtex_entry(p, include_abstract=True)[1])[2]
    assert text.endswith("}\n") and text.count("\n  ") == len(fields)


@pytest.mark.parametrize(
    ("entry_type", "written", "venue_field"),
    [("article", "article", "journal"), ("inproceedings", "inproceedings", "booktitle"),
     ("incollection", "incollection", "booktitle"), ("phdthesis", "phdthesis", "school"),
     ("techreport", "techreport", "institution"), ("misc", "misc", "howpublished"),
     ("journal-article", "misc", "howpublished"), ("", "misc", "howpublished")],
)
def test_venue_field_by_type(entry_type: str, written: str, venue_field: str) -> None:
    etype, _, fields = parse_one(bibtex_entry(paper(entry_type=entry_type, venue="Venue & Co"))[1])
    assert etype == written
    assert fields[venue_field] == r"Venue \& Co"


def test_extra_never_duplicates_a_field() -> None:
    p = paper(arxiv="2101.00001", extra={"doi": "10.1/other", "eprint": "x", "title": "t", "journal": "J",
                                         "month": "Sept.", "note": "mayonnaise"})
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
        ("{x}", r"\{x\}"),
        ("~^\\", r"\textasciitilde{}\textasciicircum{}\textbackslash{}"),
        ("Café naïve", r"Caf{\'e} na{\"\i}ve"),
        ("Łódź Straße Ørsted", r"{\L}{\'o}d{\'z} Stra{\ss}e {\O}rsted"),
        ("Çağrı Šimko Dvořák", r"{\c{C}}a{\u{g}}r{\i} {\v{S}}imko Dvo{\v{r}}{\'a}k"),
        ("α≤β and γ", r"$\alpha\leq\beta$ and $\gamma$"),
        ("x–y — z", r"x--y --- z"),
        ("a--b ``q'' “r”", r"a-{}-b `{}`q'{}' ``r''"),
        ("日本語 ệ", "日本語 ệ"),  # no ASCII spelling: kept as UTF-8
    ],
)
def test_tex_escape(text: str, tex: str) -> None:
    assert tex_escape(text) == tex


@pytest.mark.parametrize(
    ("title", "tex"),
    [
        ("BERT: Pre-training of Deep Bidirectional Transformers", "{BERT}: Pre-training of Deep Bidirectional Transformers"),
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
    _, text = bibtex_entry(p)
    (rec,) = list(iter_bibtex_text(text, "mem.bib"))
    assert isinstance(rec, PaperRecord), rec
    assert rec.title == p.title
    assert rec.authors == p.authors
    assert (rec.year, rec.venue, rec.doi, rec.keywords, rec.entry_type) == (p.year, p.venue, p.doi, p.keywords, "article")
    assert rec.extra["pages"] == "1–11" and rec.extra["publisher"] == "Ässociation & Co" and rec.extra["volume"] == "3"


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


# Printable text from ASCII, Latin-1, Latin Extended-A/B, IPA, Greek, punctuation and symbols.
_CHARS = st.characters(codec="utf-8", max_codepoint=0x3FF, categories=("L", "N", "P", "S", "Zs"), exclude_characters="~")
# Quote ligatures (TeX meaning) and HTML entities, which the importer decodes on purpose.
_UNSUPPORTED = re.compile(r"''|``|&[A-Za-z#0-9]")


def _text(min_size: int = 0, max_size: int = 60) -> st.SearchStrategy[str]:
    return (
        st.text(_CHARS, min_size=min_size, max_size=max_size)
        .map(norm)
        .filter(lambda s: len(s) >= min_size and not _UNSUPPORTED.search(s))
    )


_NAME_PART = st.text(st.characters(codec="utf-8", max_codepoint=0x24F, categories=("Lu", "Ll")), min_size=1, max_size=12)
_NAME = st.one_of(
    st.builds(lambda last, first: f"{last}, {first}", _NAME_PART, _NAME_PART),
    st.builds(lambda a, b: f"{a} and {b}", _NAME_PART, _NAME_PART),  # a corporate name with "and"
    _NAME_PART,
)
_DOI = st.from_regex(r"10\.\d{4,5}/[a-z0-9._;()/:\-]{1,20}", fullmatch=True)
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
        keywords=", ".join(draw(st.lists(_text(min_size=1, max_size=15).filter(lambda s: "," not in s), max_size=3))),
        doi=draw(st.one_of(st.just(""), _DOI)),
        extra={k: v for k, v in (("pages", draw(_text(max_size=10))), ("publisher", draw(_text(max_size=30)))) if v},
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.sets(st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=30), max_size=5))
def test_parse_of_write_keeps_every_field(p: PaperRecord, existing: set[str]) -> None:
    key, text = bibtex_entry(p, existing, include_abstract=True)
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
        assert tex_to_unicode(fields[name]) == value
    # The whole importer agrees too.
    (rec,) = list(iter_bibtex_text(text, "mem.bib"))
    assert isinstance(rec, PaperRecord), str(rec)
    assert (rec.title, rec.authors, rec.year, rec.doi, rec.keywords, rec.abstract) == (
        norm(p.title), p.authors, p.year, p.doi, p.keywords, p.abstract)
    assert rec.venue == p.venue
