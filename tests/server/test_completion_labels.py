"""The fields of a completion item, as each editor renders them into its menu line (pure, no editor).

Each ``render_*`` function below is the rule the editor's own source applies (quoted in
server/completion/labels.py); the real editors are driven in tests/editors/test_neovim_menu.py and
tests/editors/test_eglot.py. What must hold in every one: the title is on the menu line, the key is what
is inserted, and two versions of a paper under one key read differently.
"""

from __future__ import annotations

import pytest
from lsprotocol import types

from citewise.indexer.store import StoredPaper
from citewise.models.query import Candidate
from citewise.models.recommender import Recommendation
from citewise.server import draft
from citewise.server.bibindex import BibIndex
from citewise.server.completion.items import build_completion
from citewise.server.completion.labels import menu_line, short_title, short_venue, version_tags
from citewise.server.convert import completion_item

from .slot_menu import menu_order

TITLE = "Asking Clarifying Questions in Open-Domain Information-Seeking Conversations"
AUTHORS = ["Aliannejadi, Mohammad", "Zamani, Hamed", "Crestani, Fabio", "Croft, W. Bruce"]
SIGIR = "Proceedings of the 42nd International ACM SIGIR Conference on Research and Development in Information Retrieval"


def paper(pid: int, **kw) -> StoredPaper:
    base = dict(title=TITLE, authors=AUTHORS, year=2019, venue=SIGIR, entry_type="inproceedings")
    return StoredPaper(id=pid, **{**base, **kw})


CONFERENCE = paper(1, extra={"series": "SIGIR '19"}, doi="10.1145/3331184.3331265")
BULLETIN = paper(2, venue="ACM SIGIR Forum", entry_type="article")
OTHER = paper(
    3,
    title="Dense Passage Retrieval for Open-Domain Question Answering",
    authors=["Karpukhin, Vladimir", "Oguz, Barlas"],
    year=2020,
    venue="Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing (EMNLP)",
)


def items(*papers: StoredPaper, bib: BibIndex | None = None) -> list[types.CompletionItem]:
    """The LSP items the server sends for these papers, ranked in this order, at ``\\cite{|}``."""
    text = r"See \cite{}."
    cur = draft.citation_at(text, text.index("{") + 1, "latex")
    assert cur is not None
    recs = [
        Recommendation(p, Candidate(p.id, 1.0 / r, {"bm25": 1.0}, {"bm25": r}))
        for r, p in enumerate(papers, 1)
    ]
    res = build_completion(
        menu_order(recs, bib or BibIndex(), "lastnameYEARfirstword"),
        cur,
        draft.LineIndex(text),
        doc_uri="file:///d.tex",
        bib_path="/refs.bib",
        complete=True,
        with_documentation=False,
    )
    return [completion_item(e) for e in res.items]


# -- each editor's menu line, as its source builds it ----------------------------------------------
def render_neovim(i: types.CompletionItem) -> str:
    """vim.lsp.completion / vim.lsp.omnifunc: abbr = label, kind, menu = detail."""
    return f"{i.label}  Reference  {i.detail or ''}"


def render_eglot(i: types.CompletionItem) -> str:
    """eglot-completion-at-point: the candidate (label, as there is a textEdit) and " " + detail."""
    return i.label + " " + (i.detail or "Reference")


def render_nvim_cmp(i: types.CompletionItem) -> str:
    """cmp.Entry:get_vim_item: abbr = label, menu = labelDetails.detail .. labelDetails.description."""
    d = i.label_details
    return f"{i.label} Reference {(d.detail or '') + (d.description or '') if d else ''}"


def render_blink(i: types.CompletionItem) -> str:
    """blink.cmp's default columns: label .. labelDetails.detail (<= 60 wide), description (<= 30)."""
    d = i.label_details or types.CompletionItemLabelDetails()

    def cut(text: str, width: int) -> str:
        return text if len(text) <= width else text[: width - 1] + "…"

    return cut(i.label + (d.detail or ""), 60) + " " + cut(d.description or "", 30)


def render_vscode(i: types.CompletionItem) -> str:
    """The suggest widget: label, labelDetails.detail right after it, labelDetails.description."""
    d = i.label_details or types.CompletionItemLabelDetails()
    return f"{i.label}{d.detail or ''}    {d.description or ''}"


RENDERERS = [render_neovim, render_eglot, render_nvim_cmp, render_blink, render_vscode]


@pytest.mark.parametrize("render", RENDERERS, ids=lambda f: f.__name__.removeprefix("render_"))
def test_every_editor_shows_key_and_title_and_tells_versions_apart(render) -> None:
    conf, bulletin, other = items(CONFERENCE, BULLETIN, OTHER)
    assert conf.label == bulletin.label == "aliannejadi2019asking"
    for item in (conf, bulletin, other):
        line = render(item)
        assert line.startswith(item.label), line
        shown_title = (item.label_details.description if render is render_blink else item.detail) or ""
        assert line.find(shown_title[:25]) > len(item.label), (line, shown_title)
    assert "Asking Clarifying Questions" in render(conf) and "Dense Passage Retrieval" in render(other)
    assert render(conf) != render(bulletin)


@pytest.mark.parametrize("render", [render_neovim, render_eglot, render_nvim_cmp, render_vscode])
def test_title_author_year_venue_on_the_line(render) -> None:
    (item,) = items(OTHER)
    assert (
        "Dense Passage Retrieval for Open-Domain Question Answering (Karpukhin and Oguz 2020, EMNLP)"
        in render(item)
    )


def test_item_fields() -> None:
    conf, bulletin, other = items(CONFERENCE, BULLETIN, OTHER)
    # What is inserted and what filters stay the key (and title words, first author).
    for item in (conf, bulletin, other):
        assert item.text_edit.new_text == item.label
        assert item.filter_text.startswith(item.label + " ")
        assert item.kind == types.CompletionItemKind.Reference
        assert item.detail == item.label_details.description  # one menu line, whichever field shows it
    assert "Dense Passage Retrieval" in other.filter_text and "Karpukhin" in other.filter_text
    assert (
        conf.detail
        == "Asking Clarifying Questions in Open-Domain Information-Seeking… (Aliannejadi et al. 2019, SIGIR)"
    )
    assert bulletin.detail.endswith("(Aliannejadi et al. 2019, ACM SIGIR Forum)")
    # Only the two items of one key name their version, where VS Code and blink.cmp cut nothing.
    assert (conf.label_details.detail, bulletin.label_details.detail) == (
        " (SIGIR, 2019) ",
        " (ACM SIGIR Forum, 2019) ",
    )
    assert other.label_details.detail is None
    assert conf.data["labelDetail"] == " (SIGIR, 2019) " and "labelDetail" not in other.data


def test_in_bib_mark_and_bare_bib_entry() -> None:
    bib = BibIndex.from_texts([("refs.bib", "@inproceedings{mine, doi = {10.1145/3331184.3331265}}")])
    (item,) = items(CONFERENCE, bib=bib)
    assert item.label == "mine" and item.detail.startswith("✓ in .bib · Asking Clarifying")
    # A .bib entry not in the store: only its title is known; no "()" and no "unknown authors".
    assert menu_line(StoredPaper(title="An Entry of My Own"), in_bib=True) == "✓ in .bib · An Entry of My Own"


@pytest.mark.parametrize(
    ("venue", "series", "expected"),
    [
        (SIGIR, "SIGIR '19", "SIGIR"),  # the BibTeX series, its year dropped
        (SIGIR, "", "SIGIR"),  # the capitalised words, the publisher left out
        ("ACM SIGIR Forum", "", "ACM SIGIR Forum"),  # short: as it is
        (OTHER.venue, "", "EMNLP"),  # the acronym in parentheses
        ("Proceedings of the 2019 Conference on Empirical Methods (EMNLP-IJCNLP 2019)", "", "EMNLP-IJCNLP"),
        ("Advances in Neural Information Processing Systems", "", "Advances in Neural Information…"),
        (
            "Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics",
            "",
            "Annual Meeting of the…",
        ),
        ("Proceedings of EMNLP", "", "EMNLP"),
        ("", "", ""),
    ],
)
def test_short_venue(venue: str, series: str, expected: str) -> None:
    assert short_venue(paper(9, venue=venue, extra={"series": series} if series else {})) == expected


def test_version_tags_number_what_venue_and_year_cannot_tell_apart() -> None:
    same = paper(4)
    assert version_tags([("k", same), ("k", paper(5)), ("x", OTHER)]) == [
        " (SIGIR, 2019 #1) ",
        " (SIGIR, 2019 #2) ",
        "",
    ]
    assert version_tags([("k", same)]) == [""]


def test_short_title_cuts_at_a_word() -> None:
    assert short_title("A  short\ntitle") == "A short title"
    assert short_title(TITLE, 40) == "Asking Clarifying Questions in…"
