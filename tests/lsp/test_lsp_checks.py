"""The reference checks (issue 27) end to end through the real server, on the real ACM-CR store
(``lsp_store``: SIGIR 2015-2019 and CHIIR; skipped without ../shared/data): each check a
diagnostic at the cited key with its code, severity and message; the ``checks`` setting; and the
fixes as code actions: replace a suspect entry with the stored paper, update a mismatched entry's
fields (also in a .bib open in the editor with unsaved changes: the edit is in the buffer's
offsets), cite the suggested paper instead of or beside an unlikely one.

The .bib holds entries copied from ACM-CR's sigir-2017.bib as they are, and entries fabricated
from them: another paper's DOI, another paper's authors, a malformed DOI, a shortened title and a
wrong year, one key defined twice, and a real entry cited in a sentence it has nothing to do with.
The workspace's .bib is imported into the server's store at start (a user's setting), so these
tests also show that a draft's own entries are no evidence about themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from citewise.models.checks.findings import default_enabled
from citewise.settings import Settings

from ..conftest import ACM_DL
from ..lsp_harness import Session, make_acm_workspace, position, start_on_acm, stop

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

WARNING, INFORMATION, HINT = (
    types.DiagnosticSeverity.Warning,
    types.DiagnosticSeverity.Information,
    types.DiagnosticSeverity.Hint,
)


# -- the .bib and the draft ---------------------------------------------------------------------
def _sigir_2017() -> str:
    return (ACM_DL / "sigir" / "sigir-2017.bib").read_text(encoding="utf-8")


def entry(bib: str, title: str, key: str) -> str:
    """The ACM-CR entry with ``title``, byte for byte but for its key."""
    i = bib.index("title = {" + title + "}")
    start = bib.rindex("\n@", 0, i) + 1
    text = bib[start : bib.index("\n}\n", i) + 2]
    return re.sub(r"^@(\w+)\{[^,]*,", lambda m: "@" + m.group(1) + "{" + key + ",", text, count=1)


def field(text: str, name: str) -> str:
    return re.search(r"^" + name + r" = \{(.*)\},$", text, re.M).group(1)  # type: ignore[union-attr]


def with_field(text: str, name: str, value: str) -> str:
    return re.sub(r"^" + name + r" = .*,$", lambda _m: f"{name} = {value},", text, count=1, flags=re.M)


IRGAN = "IRGAN: A Minimax Game for Unifying Generative and Discriminative Information Retrieval Models"
POWER = "On the Power Laws of Language: Word Frequency Distributions"
CASCADE = "Efficient Cost-Aware Cascade Ranking in Multi-Stage Retrieval"
OWN = "@article{own2020,\n  title = {An Entry of My Own About Nothing the Store Has},\n  year = 2020\n}\n"


def build_bib() -> str:
    acm = _sigir_2017()
    knrm = entry(acm, "End-to-End Neural Ad-Hoc Ranking with Kernel Pooling", "xiong2017knrm")
    irgan_doi = field(entry(acm, IRGAN, "x"), "doi")
    twice = entry(acm, "Retrieval Consistency in the Presence of Query Variations", "twice")
    parts = [
        knrm,
        entry(acm, "Neural Ranking Models with Weak Supervision", "dehghani2017weak"),
        entry(acm, "Variational Deep Semantic Hashing for Text Documents", "chaidaroon2017hashing"),
        entry(acm, "Exploiting Food Choice Biases for Healthier Recipe Recommendation", "food2017"),
        # another paper's DOI
        with_field(
            entry(acm, "Deep Learning for Extreme Multi-Label Text Classification", "fakedoi"),
            "doi",
            "{" + irgan_doi + "}",
        ),
        # another paper's authors
        with_field(
            entry(acm, "Relevance-Based Word Embedding", "fakeauthors"),
            "author",
            "{" + field(knrm, "author") + "}",
        ),
        with_field(
            entry(acm, "Jointly Learning Word Embeddings and Latent Topics", "fakemalformed"),
            "doi",
            "{10.11/abc}",
        ),
        # a shortened title and last year's date, as a bare number
        with_field(
            with_field(entry(acm, CASCADE, "oldcascade"), "year", "2016"),
            "title",
            "{Efficient Cost-Aware Cascade Ranking}",
        ),
        twice,
        twice,
        OWN,
    ]
    return "\n".join(parts)


# Every sentence fits its real citation but food2017's. own2020's sentence repeats its title: the
# workspace .bib is imported into the store, so the fit check knows the entry (by its key) and
# would call it unlikely in an unrelated sentence, though nothing says what it is about.
BODY = r"""Kernel pooling over word-level similarities learns soft matches for ad-hoc ranking end to end \cite{xiong2017knrm}.
Neural ranking models can be trained with weak supervision from an unsupervised ranker such as BM25 \cite{dehghani2017weak}.
Variational autoencoders learn binary codes for semantic hashing of text documents \cite{chaidaroon2017hashing}.
Power laws describe the distributions of word frequencies in language \cite{food2017}.
Deep networks classify text into thousands of labels \cite{fakedoi}.
Word embeddings can be learned from relevance \cite{fakeauthors}, and jointly with topics \cite{fakemalformed}.
Cascade ranking trades efficiency for effectiveness \cite{oldcascade}.
Query variations change retrieval results \cite{twice}, as an entry of my own about nothing the store has found \cite{own2020}.
Generative adversarial networks learn hash codes \cite{10.1145/3077136.3080842}, unlike \cite{nosuchkey}.
"""


def draft(bib: str) -> str:
    return (
        "\\documentclass{article}\n\\title{Neural models for ad-hoc retrieval}\n\\begin{document}\n"
        f"{BODY}\\bibliography{{{bib}}}\n\\end{{document}}\n"
    )


REAL = ("xiong2017knrm", "dehghani2017weak", "chaidaroon2017hashing")
# What the draft gets by default: key -> {(code, severity)}.
EXPECTED = {
    "food2017": {("unlikely-citation", HINT)},
    "fakedoi": {("suspect-reference", WARNING)},
    "fakeauthors": {("suspect-reference", WARNING)},
    "fakemalformed": {("suspect-reference", WARNING)},
    "oldcascade": {("metadata-mismatch", INFORMATION)},
    "twice": {("duplicate-entry", WARNING)},
    "10.1145/3077136.3080842": {("unknown-key", WARNING)},
    "nosuchkey": {("unknown-key", WARNING)},
}


@pytest.fixture(scope="module")
def bib_text() -> str:
    return build_bib()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory: pytest.TempPathFactory, lsp_store: Path, bib_text: str) -> Session:
    ws = make_acm_workspace(tmp_path_factory.mktemp("checks"), lsp_store, draft=False)
    (ws / "refs.bib").write_text(bib_text, encoding="utf-8")
    session = await start_on_acm(ws)
    yield session
    await stop(session)


# -- helpers ------------------------------------------------------------------------------------
def by_key(diags: list[types.Diagnostic]) -> dict[str, set[tuple[str, int]]]:
    out: dict[str, set[tuple[str, int]]] = {}
    for d in diags:
        if isinstance(d.data, dict) and "key" in d.data:
            out.setdefault(d.data["key"], set()).add((d.code, d.severity))
    return out


async def settled(
    lsp: Session, uri: str, ok: Callable[[dict[str, set[tuple[str, int]]]], bool], what: str
) -> list[types.Diagnostic]:
    """The draft's diagnostics once ``ok`` holds for them by key (a .bib is indexed in the
    background: the first publication may come before its keys are known)."""
    try:
        return await lsp.wait_for(
            lambda: (d := lsp.diagnostics(uri)) is not None and ok(by_key(d)) and d, what, timeout=60
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the last ones: {by_key(lsp.diagnostics(uri) or [])}") from None


def one(diags: list[types.Diagnostic], key: str, code: str) -> types.Diagnostic:
    (d,) = [d for d in diags if isinstance(d.data, dict) and d.data.get("key") == key and d.code == code]
    return d


async def actions_at(lsp: Session, uri: str, diag: types.Diagnostic) -> list[types.CodeAction]:
    got = await lsp.client.text_document_code_action_async(
        types.CodeActionParams(types.TextDocumentIdentifier(uri), diag.range, types.CodeActionContext([diag]))
    )
    return [a for a in got or [] if isinstance(a, types.CodeAction)]


def edits_of(action: types.CodeAction) -> dict[str, list[types.TextEdit]]:
    out: dict[str, list[types.TextEdit]] = {}
    assert action.edit is not None
    for c in action.edit.document_changes or []:
        if isinstance(c, types.TextDocumentEdit):
            out.setdefault(c.text_document.uri, []).extend(c.edits)
    for uri, edits in (action.edit.changes or {}).items():
        out.setdefault(uri, []).extend(edits)
    return out


def applied(text: str, edits: list[types.TextEdit]) -> str:
    """``text`` with LSP edits applied (positions in UTF-16 units of ``\\n``-split lines)."""

    def offset(p: types.Position) -> int:
        lines = text.split("\n")
        before = sum(len(x) + 1 for x in lines[: p.line])
        line = lines[p.line] if p.line < len(lines) else ""
        return before + len(line.encode("utf-16-le")[: 2 * p.character].decode("utf-16-le"))

    spans = sorted(((offset(e.range.start), offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for s, e, t in spans:
        text = text[:s] + t + text[e:]
    return text


def entry_span(text: str, key: str) -> tuple[int, int]:
    start = text.index("@", text.rindex("\n@", 0, text.index("{" + key + ",")))
    return start, text.index("\n}", start) + 2


# -- the tests ----------------------------------------------------------------------------------
async def test_the_settings_defaults_are_the_checks_defaults() -> None:
    """settings.py may not import the checks (layout rule), so it spells their defaults out."""
    assert Settings().checks == default_enabled()
    settings, problems = Settings.from_dict({"checks": {"not-in-store": True}})
    assert problems == [] and settings.checks == {**default_enabled(), "not-in-store": True}


async def test_each_check_is_a_diagnostic_at_the_cited_key(lsp: Session) -> None:
    text = draft("refs")
    uri = lsp.open("checks.tex", text)
    diags = await settled(lsp, uri, lambda got: got == EXPECTED, "the checks' diagnostics")
    assert not any(key in by_key(diags) for key in REAL)  # the unmodified real entries: nothing
    irgan = one(diags, "fakedoi", "suspect-reference")
    assert irgan.message.startswith("'fakedoi': DOI 10.1145/3077136.3080786 belongs to \u201cIRGAN")
    assert "not to \u201cDeep Learning for Extreme Multi-Label Text Classification\u201d" in irgan.message
    assert irgan.range.start == position(text, "fakedoi", after=False)
    assert irgan.range.end == position(text, "fakedoi") and irgan.source == "citewise"
    assert irgan.data["suggested"] == "wang2017irgan" and irgan.data["fix"] == "replace"
    authors = one(diags, "fakeauthors", "suspect-reference")
    assert "looks like \u201cRelevance-Based Word Embedding\u201d (Zamani et al., 2017)" in authors.message
    assert "its authors (Xiong, Dai, Callan et al.) are not the paper's (Zamani, Croft)" in authors.message
    malformed = one(diags, "fakemalformed", "suspect-reference")
    assert "the DOI '10.11/abc' is malformed" in malformed.message and "fix" not in malformed.data
    cascade = one(diags, "oldcascade", "metadata-mismatch")
    assert cascade.message == (
        f"'oldcascade' differs from the stored record of the paper: title \u201c{CASCADE}\u201d; year 2017"
    )
    assert cascade.data["fields"] == ["title", "year"]
    assert "is defined 2 times" in one(diags, "twice", "duplicate-entry").message
    unlikely = one(diags, "food2017", "unlikely-citation")
    assert f"this sentence reads like \u201c{POWER}\u201d" in unlikely.message
    known = one(diags, "10.1145/3077136.3080842", "unknown-key")
    assert known.message == (
        "'10.1145/3077136.3080842' is not in the bibliography (the store knows it: Deep Semantic Hashing "
        "with Generative Adversarial Networks; use the code action to add the entry)"
    )
    assert one(diags, "nosuchkey", "unknown-key").message == "'nosuchkey' is not in the bibliography"
    # The unknown key the store knows keeps its "Add missing BibTeX entry" fix.
    (add,) = [a for a in await actions_at(lsp, uri, known) if a.title.startswith("Add missing BibTeX entry")]
    assert list(add.diagnostics or []) == [known]


async def test_the_checks_setting_turns_checks_on_and_off(lsp: Session) -> None:
    uri = lsp.open("setting.tex", draft("refs"))
    await settled(lsp, uri, lambda got: got == EXPECTED, "the default checks")
    try:
        lsp.configure({"checks": {"unlikely-citation": False, "not-in-store": True}})
        expected = {k: v for k, v in EXPECTED.items() if k != "food2017"} | {
            "own2020": {("not-in-store", INFORMATION)}
        }
        diags = await settled(lsp, uri, lambda got: got == expected, "unlikely-citation off, not-in-store on")
        assert "'own2020' matches no paper in the store" in one(diags, "own2020", "not-in-store").message
        # A bad part of the setting keeps that part's default and says so; the rest applies.
        lsp.configure(
            {"checks": {"no-such-check": False, "suspect-reference": "no", "duplicate-entry": False}}
        )
        expected = {k: v for k, v in EXPECTED.items() if k != "twice"}
        await settled(lsp, uri, lambda got: got == expected, "duplicate-entry off, suspect-reference kept")
        shown = await lsp.wait_for(
            lambda: (m := [m for m in lsp.client.messages if "'checks'" in m.message]) and len(m) >= 2 and m,
            "a message per bad entry",
        )
        text = " ".join(m.message for m in shown)
        assert "entry 'no-such-check' = False is invalid (unknown check" in text
        assert "entry 'suspect-reference' = 'no' is invalid (expected true or false); using True" in text
    finally:
        lsp.configure({})
    await settled(lsp, uri, lambda got: got == EXPECTED, "the defaults again")


def stored_entry(store: Path, doi: str, key: str) -> str:
    """The entry the store's paper with ``doi`` gets under ``key`` (what the replace fix writes)."""
    from citewise.indexer.bibtex_writer import format_entry
    from citewise.indexer.store import Store

    db = Store(store, create=False)
    try:
        paper = db.find(doi=doi)
        assert paper is not None
        return format_entry(paper, key).rstrip("\n")
    finally:
        db.close()


async def test_replace_a_suspect_entry_with_the_stored_paper(
    lsp: Session, bib_text: str, lsp_store: Path
) -> None:
    uri = lsp.open("replace.tex", draft("refs"))
    diags = await settled(lsp, uri, lambda got: got == EXPECTED, "the checks' diagnostics")
    bib_uri = lsp.uri("refs.bib")
    suspect = one(diags, "fakedoi", "suspect-reference")
    actions = await actions_at(lsp, uri, suspect)
    (replace,) = [a for a in actions if a.title.startswith("Replace entry")]
    assert replace.title.startswith(
        "Replace entry 'fakedoi' with the stored paper: IRGAN: A Minimax Game for Unifying"
    ) and replace.title.endswith("(2017)")
    assert list(replace.diagnostics or []) == [suspect] and replace.kind == types.CodeActionKind.QuickFix
    edits = edits_of(replace)
    assert set(edits) == {bib_uri}  # the draft keeps citing 'fakedoi'
    new = applied(bib_text, edits[bib_uri])
    start, end = entry_span(bib_text, "fakedoi")
    assert new.startswith(bib_text[:start]) and new.endswith(bib_text[end:])  # the rest, byte-exact
    replaced = new[start : len(new) - len(bib_text[end:])]
    assert replaced == stored_entry(lsp_store, "10.1145/3077136.3080786", "fakedoi")
    assert replaced.startswith("@inproceedings{fakedoi,\n  author = {Wang, Jun and Yu, Lantao")
    assert "title = {{IRGAN}: {A} Minimax Game for Unifying" in replaced
    assert "Extreme Multi-Label" not in replaced and "abstract" not in replaced  # bibFields: standard
    # Wrong authors: the entry of the paper the title names.
    (fix,) = [
        a
        for a in await actions_at(lsp, uri, one(diags, "fakeauthors", "suspect-reference"))
        if a.title.startswith("Replace entry")
    ]
    assert (
        fix.title
        == "Replace entry 'fakeauthors' with the stored paper: Relevance-Based Word Embedding (2017)"
    )
    replaced = applied(bib_text, edits_of(fix)[bib_uri])
    assert "author = {Zamani, Hamed and Croft, W. Bruce}" in replaced
    assert replaced.count("Xiong, Chenyan") == bib_text.count("Xiong, Chenyan") - 1
    # A malformed DOI names no stored paper: nothing to replace it with.
    malformed = one(diags, "fakemalformed", "suspect-reference")
    assert not [a for a in await actions_at(lsp, uri, malformed) if a.title.startswith("Replace entry")]


def cascade_updated(text: str) -> str:
    """The oldcascade entry with the two values the fix must set, everything else as it was."""
    start, end = entry_span(text, "oldcascade")
    fixed = (
        text[start:end]
        .replace("title = {Efficient Cost-Aware Cascade Ranking},", f"title = {{{CASCADE}}},")
        .replace("year = 2016,", "year = 2017,")
    )
    return text[:start] + fixed + text[end:]


async def test_update_a_mismatched_entry_from_the_store(lsp: Session, bib_text: str) -> None:
    uri = lsp.open("update.tex", draft("refs"))
    diags = await settled(lsp, uri, lambda got: got == EXPECTED, "the checks' diagnostics")
    mismatch = one(diags, "oldcascade", "metadata-mismatch")
    (update,) = [a for a in await actions_at(lsp, uri, mismatch) if a.title.startswith("Update")]
    assert update.title == "Update 'oldcascade' from the store: title, year"
    assert list(update.diagnostics or []) == [mismatch]
    (bib_edits,) = edits_of(update).values()
    assert [e.new_text for e in bib_edits] == [f"{{{CASCADE}}}", "2017"]  # the values, nothing more
    assert applied(bib_text, bib_edits) == cascade_updated(bib_text) != bib_text


async def test_a_fix_targets_the_unsaved_bib_buffer(lsp: Session, bib_text: str, lsp_store: Path) -> None:
    """The .bib is open in the editor with unsaved changes that move every entry: the fix's
    offsets are the buffer's (the file on disk would put them lines away), its version the buffer's."""
    (lsp.root / "buffer.bib").write_text(bib_text, encoding="utf-8")
    uri = lsp.open("buffer.tex", draft("buffer"))
    await settled(lsp, uri, lambda got: got == EXPECTED, "the checks' diagnostics")
    bib_uri = lsp.open("buffer.bib", bib_text, "bibtex")
    # Unsaved: three lines on top, and a year of a real entry changed (a new mismatch shows the
    # server reads the buffer).
    hashing = entry_span(bib_text, "chaidaroon2017hashing")
    buffer = bib_text[: hashing[0]] + bib_text[hashing[0] : hashing[1]].replace(
        "year = {2017}", "year = {2018}"
    )
    buffer = "% my notes\n% more notes\n\n" + buffer + bib_text[hashing[1] :]
    version = lsp.change(bib_uri, buffer)
    expected = EXPECTED | {"chaidaroon2017hashing": {("metadata-mismatch", INFORMATION)}}
    diags = await settled(lsp, uri, lambda got: got == expected, "the buffer's entries checked")
    mismatch = one(diags, "oldcascade", "metadata-mismatch")
    (update,) = [a for a in await actions_at(lsp, uri, mismatch) if a.title.startswith("Update")]
    (change,) = [c for c in update.edit.document_changes if isinstance(c, types.TextDocumentEdit)]
    assert change.text_document.uri == bib_uri and change.text_document.version == version
    assert applied(buffer, list(change.edits)) == cascade_updated(buffer)
    lsp.apply(update.edit)  # into the buffer (unsaved), as an editor does
    assert lsp.buffers[bib_uri] == cascade_updated(buffer)
    assert (lsp.root / "buffer.bib").read_text(encoding="utf-8") == bib_text
    fixed = {k: v for k, v in expected.items() if k != "oldcascade"}
    await settled(lsp, uri, lambda got: got == fixed, "the mismatch to go once the buffer is fixed")
    # The replace fix in the same buffer, now that it changed again.
    suspect = one(lsp.diagnostics(uri) or [], "fakedoi", "suspect-reference")
    (replace,) = [a for a in await actions_at(lsp, uri, suspect) if a.title.startswith("Replace entry")]
    before = lsp.buffers[bib_uri]
    start, end = entry_span(before, "fakedoi")
    expected_text = (
        before[:start] + stored_entry(lsp_store, "10.1145/3077136.3080786", "fakedoi") + before[end:]
    )
    lsp.apply(replace.edit)
    assert lsp.buffers[bib_uri] == expected_text and expected_text.startswith("% my notes\n")
    replaced = {k: v for k, v in fixed.items() if k != "fakedoi"}
    await settled(lsp, uri, lambda got: got == replaced, "the suspect entry's warning to go once replaced")


async def test_unlikely_citation_actions(lsp: Session, bib_text: str) -> None:
    (lsp.root / "unlikely.bib").write_text(bib_text, encoding="utf-8")
    text = draft("unlikely")
    uri = lsp.open("unlikely.tex", text)
    diags = await settled(lsp, uri, lambda got: got == EXPECTED, "the checks' diagnostics")
    unlikely = one(diags, "food2017", "unlikely-citation")
    actions = await actions_at(lsp, uri, unlikely)
    titles = [a.title for a in actions]
    instead = f"Cite \u201c{POWER}\u201d instead of 'food2017'"
    also = f"Also cite \u201c{POWER}\u201d"
    assert instead in titles and also in titles, titles
    by_title = {a.title: a for a in actions}
    assert list(by_title[instead].diagnostics or []) == [unlikely] and list(
        by_title[also].diagnostics or []
    ) == [unlikely]
    bib_uri = lsp.uri("unlikely.bib")
    edits = edits_of(by_title[instead])
    assert set(edits) == {uri, bib_uri}  # ONE edit: the key and the entry
    ((key_edit,), (entry_edit,)) = edits[uri], edits[bib_uri]
    new_key = key_edit.new_text
    assert entry_edit.new_text.lstrip().startswith("@inproceedings{" + new_key + ",")
    assert POWER in entry_edit.new_text and new_key not in bib_text
    assert applied(text, [key_edit]) == text.replace("\\cite{food2017}", "\\cite{" + new_key + "}")
    ((also_edit,),) = [e for u, e in edits_of(by_title[also]).items() if u == uri]
    assert applied(text, [also_edit]) == text.replace("\\cite{food2017}", "\\cite{food2017, " + new_key + "}")
    lsp.apply(by_title[instead].edit)
    await lsp.command(by_title[instead].command.command, *(by_title[instead].command.arguments or []))
    fixed = {k: v for k, v in EXPECTED.items() if k != "food2017"}
    await settled(
        lsp, uri, lambda got: got == fixed, "no unlikely citation once the suggested paper is cited"
    )
    # Markdown: "; @key" in a bracketed citation.
    sentence = BODY.splitlines()[3].replace("\\cite{food2017}", "[@food2017]")
    md = f"---\ntitle: Notes\nbibliography: unlikely.bib\n---\n\n{sentence}\n"
    md_uri = lsp.open("unlikely.md", md, "markdown")
    md_diags = await settled(
        lsp, md_uri, lambda got: "food2017" in got, "the Markdown draft's unlikely citation"
    )
    md_actions = {
        a.title: a for a in await actions_at(lsp, md_uri, one(md_diags, "food2017", "unlikely-citation"))
    }
    ((md_edit,),) = [e for u, e in edits_of(md_actions[also]).items() if u == md_uri]
    assert applied(md, [md_edit]) == md.replace("[@food2017]", f"[@food2017; @{new_key}]")
