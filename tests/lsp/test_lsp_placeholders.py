"""Each placeholder its own context (issue 16), end to end through the real server.

The bundled ``examples/draft.tex`` has one sentence with three placeholders ("triplet loss and
hard negative mining \\citep{}", "a navigable small world graph index \\cite{}", "by their
reciprocal ranks \\cite{XXX}"); with the whole sentence as every placeholder's query they all got
one list. Completion (the cursor's context) and the placeholder diagnostics (the draft reader's
contexts) must now rank each placeholder by its own words.
"""

from __future__ import annotations

import pytest
import pytest_asyncio

from ..lsp_harness import EXAMPLES, Session, build_store, start, stop

pytestmark = pytest.mark.asyncio(loop_scope="module")

NEEDLES = ("mining \\citep{", "graph index \\cite{", "reciprocal ranks \\cite{")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp(tmp_path_factory) -> Session:
    base = tmp_path_factory.mktemp("placeholders")
    store = build_store(base / "store")  # examples/library.bib
    root = base / "ws"
    root.mkdir()  # no references.bib: a .bib paper would rise a place over strangers (models/bib_lift.py)
    session = await start(root, store, "visual-studio-code", options={"rerank": True})
    yield session
    await stop(session)


async def test_each_placeholder_of_a_sentence_gets_its_own_list(lsp: Session) -> None:
    uri = lsp.open("draft.tex", (EXAMPLES / "draft.tex").read_text(encoding="utf-8"))
    lists = {}
    for needle in NEEDLES:
        items = (await lsp.complete_final(uri, needle)).items
        lists[needle] = [i.label for i in items[:5]]
        assert lists[needle], needle
    tops = [labels[0] for labels in lists.values()]
    assert len(set(tops)) == 3, lists  # three different best suggestions
    assert len({tuple(v) for v in lists.values()}) == 3, lists


async def test_a_placeholder_ranks_the_paper_of_its_own_words_higher(lsp: Session) -> None:
    """The paper whose title shares a placeholder's own words ranks better at that placeholder
    than at its neighbours in the same sentence (no fixed order is assumed)."""
    uri = lsp.open("draft2.tex", (EXAMPLES / "draft.tex").read_text(encoding="utf-8"))
    labels = {n: [i.label for i in (await lsp.complete_final(uri, n)).items] for n in NEEDLES}

    def rank(needle: str, key_part: str) -> int:
        return next((i for i, k in enumerate(labels[needle]) if key_part in k), len(labels[needle]))

    # The keys are built from the first author, year and first title word (library.bib's papers).
    for own, words in zip(NEEDLES, ("schroff", "malkov", "cormack"), strict=True):
        for other in NEEDLES:
            if other != own:
                assert rank(own, words) < rank(other, words), (words, labels)


async def test_placeholder_diagnostics_name_different_papers(lsp: Session) -> None:
    uri = lsp.open("draft3.tex", (EXAMPLES / "draft.tex").read_text(encoding="utf-8"))
    diags = await lsp.latest_diagnostics(uri)
    text = lsp.buffers[uri]
    line = text[: text.index("graph index \\cite{")].count("\n")
    # The method sentence spans two lines; its three placeholders are on them.
    tops = [d.message for d in diags if d.source and d.range.start.line in (line - 1, line)]
    tops = [m for m in tops if "top:" in m]
    assert len(tops) == 3, [d.message for d in diags]
    assert len(set(tops)) == 3, tops
