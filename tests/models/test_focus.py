"""Each placeholder its own context (issue 16): marked contexts, segments, weights, loaders.

Pure logic on hand-written sentences; the per-placeholder loader also on the real ACM-CR dev files
(skipped when absent). The end-to-end check through the server is test_lsp_placeholders.py.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from citewise.evaluation import placeholders as ep
from citewise.evaluation import protocol as ev
from citewise.indexer.bm25 import Tokenizer
from citewise.models.focus import (
    OTHER_MARK as O,
)
from citewise.models.focus import (
    PLACEHOLDER_MARK as P,
)
from citewise.models.focus import (
    focus_text,
    local_weights,
    marked_query,
    marked_window,
    strip_marks,
)
from citewise.models.query import ContextQuery

from ..conftest import ACM_DEV, require


def own(marked: str) -> str:
    return focus_text(marked_query(marked))[0]


def test_marked_query_keeps_positions_and_normalises_like_the_draft_reader() -> None:
    q = marked_query(f"  rule-based {P} , and end-to-end {O} systems  {O}.", "T", "A")
    assert q.local == "rule-based, and end-to-end systems."
    assert q.local[: q.at] == "rule-based" and q.others == (26, 34)
    assert (q.citing_title, q.citing_abstract) == ("T", "A")
    assert marked_query("plain text").at == -1 and marked_query("plain text").others == ()
    assert marked_query(f"{P} opens").local == "opens" and marked_query(f"{P} opens").at == 0
    assert strip_marks(f"a {O} b {P}.") == "a b."


@pytest.mark.parametrize(
    ("marked", "expected"),
    [
        # a marker follows the words it supports
        (f"Both rule-based {P} and end-to-end {O} systems were studied.", "Both rule-based"),
        (f"Both rule-based {O} and end-to-end {P} systems were studied.", "and end-to-end"),
        (f"Hidden Markov Models {O} and Neural Networks {P}.", "and Neural Networks"),
        # cut at the last clause boundary (", while", ";", ":")
        (
            f"For instance, images were studied in {O}, while live webpages were studied in {P}.",
            "live webpages were studied in",
        ),
        (f"Two dimensions {O}: user models from explicit signals {P}.", "user models from explicit signals"),
        # a bare comma is not a boundary (lists)
        (f"Examples are VGG {O}, DenseNet {P}, ResNet {O}.", ", DenseNet"),
        # a marker opening its clause supports what follows
        (f"In a follow-up work, {P} proposed new codes, and checksums {O}.", "proposed new codes"),
        (f"Later, {P} fixed it {O}.", "fixed it"),
        (f"{O} introduced predictive models, whereas {P} explored taxonomies.", "explored taxonomies."),
        (f"{O} used facet pairs, and {P} extracted reviews, and asked.", "extracted reviews"),
    ],
)
def test_the_placeholder_segment(marked: str, expected: str) -> None:
    assert own(marked) == expected


@pytest.mark.parametrize(
    "marked",
    [
        "No position at all.",
        f"One citation only {P}, which is strong; another clause.",  # no other marker
        f"Adjacent markers {O}{P} share their words.",  # one group
        f"{O} and {P} addressed personalization: when to use profiles.",  # one group ("and" is no word)
        f"{O} {P}",  # nothing to weigh
    ],
)
def test_every_word_is_the_placeholders_own(marked: str) -> None:
    q = marked_query(marked)
    assert focus_text(q) == (q.local, "")


def test_weights_leave_single_citation_queries_unchanged() -> None:
    tok = Tokenizer()
    single = marked_query(f"Triplet loss {P} for face embeddings.")
    assert local_weights(single, single.text(), tok) == single.text()
    q = marked_query(f"Triplet loss {P} and small world graphs {O}.", "Citing title")
    w = local_weights(q, q.text(), tok)
    assert isinstance(w, Counter)
    assert w[tok("triplet")[0]] == 1.0 and w[tok("graphs")[0]] == 0.5 and w[tok("title")[0]] == 1.0
    assert local_weights(q, q.text(), tok, rest_weight=1.0) == q.text()  # the pre-issue-16 query


def test_marked_window_for_the_reranker() -> None:
    q = marked_query(f"{'a ' * 150}near words {P}, after words {'z ' * 150}")
    win = marked_window(q, chars=40)
    assert "near words [CIT], after words" in win and len(win) <= 40 * 2 + 7
    assert marked_window(ContextQuery("no position")) == "no position"


def test_segmenting_is_linear_on_adversarial_text() -> None:
    """100 KB of clause boundaries, or of markers, without content words between: linear."""
    texts = [
        (", and " * 6000) + P + ("; x " * 6000) + O + (", " * 6000) + O + ("; a " * 6000),
        (f"of {O} " * 12000) + P + (f" the {O}" * 12000),  # thousands of markers, no word between
    ]
    for text in texts:
        t = time.perf_counter()
        q = marked_query(text)
        focus_text(q)
        marked_window(q)
        assert time.perf_counter() - t < 2.0


# -- the per-placeholder protocol -------------------------------------------------------------
XML = """<doc><doi>10.1145/Q.1</doi><title>Citing title</title><abstract>Citing abstract.</abstract>
<contexts><context id="01" section="intro">
<s cites="1,2,3,4">Rule-based [1, 2] and end-to-end [3-4] systems were studied.</s>
<s cites="5">Only one marker [5] here.</s>
<s cites="6">A typo marker [7] and a real one [6].</s>
</context></contexts>
<references><reference id="1">10.1145/A.1</reference><reference id="2">10.1145/A.2</reference>
<reference id="3">10.1145/A.3</reference><reference id="4">10.1145/A.4</reference>
<reference id="5">10.1145/A.5</reference><reference id="6">10.1145/A.6</reference>
<reference id="7">10.1145/A.7</reference></references></doc>"""


def test_marker_ids() -> None:
    assert ep.marker_ids("[2, 11]") == ["2", "11"]
    assert ep.marker_ids("[3-5]") == ["3", "4", "5"] and ep.marker_ids("[3–5; 9]") == ["3", "4", "5", "9"]


def test_per_placeholder_queries(tmp_path: Path) -> None:
    (tmp_path / "q.xml").write_text(XML)
    coll = {f"10.1145/a.{i}" for i in range(1, 8)}
    queries = ep.load_dev_queries(tmp_path, coll)
    got = {q.qid.split("#")[1]: q for q in queries}
    assert sorted(got) == ["01.1@1", "01.1@2", "01.2@1", "01.3@2"]
    a, b = got["01.1@1"].query, got["01.1@2"].query
    assert a.local == b.local == "Rule-based and end-to-end systems were studied."
    assert got["01.1@1"].relevant == {"10.1145/a.1", "10.1145/a.2"}
    assert got["01.1@2"].relevant == {"10.1145/a.3", "10.1145/a.4"}
    assert a.local[: a.at] == "Rule-based" and b.local[: b.at] == "Rule-based and end-to-end"
    assert a.others == (b.at,) and b.others == (a.at,)
    # the typo'd marker [7] (not in cites) is no query but still a marker
    assert got["01.3@2"].relevant == {"10.1145/a.6"} and len(got["01.3@2"].query.others) == 1
    # the sentence protocol numbers the same sentences the same way
    sent = {q.qid for q in ev.load_dev_queries(tmp_path, coll)}
    assert {ep.sentence_of(q.qid) for q in queries} == sent
    assert ep.multi_marker_sentences(queries) == {ep.sentence_of(got["01.1@1"].qid)}
    same = ep.shared_top10(queries, {q.qid: ["x", "y"] for q in queries})
    assert (same.sentences, same.identical, same.fraction) == (1, 1, 1.0)


def test_per_placeholder_queries_on_real_dev_files() -> None:
    dev = require(ACM_DEV)
    sentence = ev.load_dev_queries(dev, None)
    placeholder = ep.load_dev_queries(dev, None)
    assert len(placeholder) > len(sentence)
    by_sentence = {q.qid: q for q in sentence}
    multi = ep.multi_marker_sentences(placeholder)
    assert len(multi) >= 50  # about one cited sentence in five has 2+ marker groups
    for q in placeholder:
        s = by_sentence[ep.sentence_of(q.qid)]
        assert q.relevant <= s.relevant  # a marker's references are some of its sentence's
        assert q.query.citing_title == s.query.citing_title
        assert "[" not in q.query.local[max(q.query.at - 1, 0) : q.query.at + 1]
    own_words = 0
    for sid in multi:
        qs = [q for q in placeholder if ep.sentence_of(q.qid) == sid]
        assert len({q.query.at for q in qs}) == len(qs)  # each its own position
        own_words += len({focus_text(q.query)[0] for q in qs}) >= 2
    # and, but for marker groups such as "[35] and [9] addressed ...", its own words
    assert own_words >= 0.9 * len(multi)


def test_acl_per_placeholder_queries(tmp_path: Path) -> None:
    """One query per (dev sentence, cited paper of the store) at that paper's marker (found by
    first author and year), the other markers removed; relevant = that paper only."""
    import json

    from citewise.indexer.records import PaperRecord
    from citewise.indexer.store import Store

    text = "Data from Marcus et al. (1993) and the tagger TnT (Brants, 2000)."
    rows = [
        {"citing": "P13-1001", "cited": "J93-2004", "text": text},
        {"citing": "P13-1001", "cited": "A00-1031", "text": text},
        {"citing": "P12-1001", "cited": "A00-1031", "text": "Training split (Brants, 2000) never used."},
    ]
    path = tmp_path / "citances.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store(tmp_path / "acl.sqlite")
    recs = [
        PaperRecord(title="TnT", authors=["Brants, Thorsten"], key="A00-1031", acl_id="A00-1031"),
        PaperRecord(title="Penn Treebank", authors=["Marcus, Mitchell"], key="J93-2004", acl_id="J93-2004"),
        PaperRecord(title="Citing paper", abstract="About tagging.", key="P13-1001", acl_id="P13-1001"),
    ]
    store.import_source("acl.jsonl", iter(recs), fmt="jsonl")
    queries, own = ep.acl_placeholder_queries(path, store)
    assert [q.relevant for q in queries] == [{"J93-2004"}, {"A00-1031"}]
    marcus, brants = (q.query for q in queries)
    assert marcus.local == brants.local == "Data from and the tagger TnT."
    assert (
        marcus.local[: marcus.at] == "Data from"
        and brants.local[: brants.at] == "Data from and the tagger TnT"
    )
    assert focus_text(brants)[0] == "and the tagger TnT"
    assert brants.citing_title == "Citing paper" and own == {"P13-1001": store.find(key="P13-1001").id}
    sentence_qids = {q.qid for q in ev.load_acl_dev_queries(path, store)[0]}
    assert {ep.sentence_of(q.qid) for q in queries} == sentence_qids


def test_reranker_reads_a_window_around_the_placeholder() -> None:
    """A long sentence keeps the words around ``[CIT]`` within the local budget (paper 004's
    windows); a query without a position is read from its start as in training."""
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    from citewise.models.reranker import EncodeSettings, PairEncoder

    words = [f"w{i}" for i in range(120)]
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[", "]", "cit", ".", ","]
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(specials + words)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    enc = PairEncoder(tok, EncodeSettings(local_max=20))
    q = marked_query(" ".join(words[:60]) + f" {P} " + " ".join(words[60:]))
    got = [tok.id_to_token(i) for i in enc.local_ids(q)]
    assert len(got) == 20 and got[got.index("cit") - 1] == "["
    assert got[got.index("[") - 1] == "w59" and "w60" in got  # the words on both sides
    assert got.index("[") > len(got) // 2  # most of the budget before the placeholder
    plain = [tok.id_to_token(i) for i in enc.local_ids(ContextQuery(" ".join(words)))]
    assert plain == words[:20]


EVAL_LIB = "\n".join(
    f"@inproceedings{{{k},\n  title = {{{t}}},\n  author = {{Doe, Jane}},\n  year = {{2019}},\n"
    f"  doi = {{10.1145/{k}}},\n  abstract = {{{t} studied in depth.}}\n}}"
    for k, t in [
        ("r1", "Rule-based dialogue managers with hand-written rules"),
        ("r2", "Finite-state rule-based dialogue control"),
        ("e1", "End-to-end neural dialogue systems trained on conversations"),
        ("e2", "End-to-end memory networks for task-oriented dialogue"),
        ("x1", "Unrelated glacier melt forecasting"),
    ]
)
EVAL_XML = """<doc><doi>10.1145/citing</doi><title>Dialogue systems</title><abstract>A survey.</abstract>
<contexts><context id="01" section="intro">
<s cites="1,2,3,4">Both rule-based managers [1, 2] and end-to-end neural models [3, 4] were studied.</s>
<s cites="5">Melt forecasting [5] is unrelated.</s>
</context></contexts>
<references><reference id="1">10.1145/r1</reference><reference id="2">10.1145/r2</reference>
<reference id="3">10.1145/e1</reference><reference id="4">10.1145/e2</reference>
<reference id="5">10.1145/x1</reference></references></doc>"""


def test_eval_reports_both_protocols(tmp_path: Path, capsys) -> None:
    """``citewise eval acm-cr --protocol both``: the usual keys (sentence level), every row, and
    the shared-list count, on a small collection the test writes."""
    import json

    from citewise.cli import main

    (tmp_path / "lib.bib").write_text(EVAL_LIB, encoding="utf-8")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "q.xml").write_text(EVAL_XML, encoding="utf-8")
    (tmp_path / "blacklist.txt").write_text("10.1145/citing\n", encoding="utf-8")
    out = tmp_path / "m.json"
    args = ["eval", "acm-cr", "--papers", str(tmp_path / "dev"), "--collection", str(tmp_path / "lib.bib")]
    args += ["--blacklist", str(tmp_path / "blacklist.txt"), "--store", str(tmp_path / "s.sqlite")]
    assert main([*args, "--protocol", "both", "--json", str(out), "-q"]) == 0
    got = json.loads(out.read_text())
    assert [k for k in ev.METRIC_KEYS if k in got] == list(ev.METRIC_KEYS) and got["queries"] == 2
    rows = got["rows"]
    assert [r["queries"] for r in rows.values()] == [2, 3, 1, 2]
    assert got["placeholder_lists"]["sentences"] == 1
    assert "2+ marker groups" in capsys.readouterr().out
    assert main([*args, "--protocol", "placeholder", "--json", str(out), "-q"]) == 0
    assert json.loads(out.read_text())["queries"] == 3


def test_the_draft_reader_marks_placeholders_and_other_citations() -> None:
    """``placeholders`` and ``marked_local_context`` mark where the placeholder and the other
    citations stand; a mark character typed in the draft is not taken for one."""
    from citewise.server import draft

    text = f"Odd {P}{O} chars, rule-based \\cite{{a}} and end-to-end \\cite{{}} systems % \\cite{{x}}\n."
    (ph,) = draft.placeholders(text, "latex")
    q = marked_query(ph.marked)
    assert ph.context == q.local == "Odd chars, rule-based and end-to-end systems."
    assert q.local[: q.at] == "Odd chars, rule-based and end-to-end" and q.local[: q.others[0]].endswith(
        "rule-based"
    )
    assert len(q.others) == 1  # the commented-out citation is no marker
    assert focus_text(q)[0] == "and end-to-end"
    md = "Rule-based [@a] and end-to-end [@?] systems."
    at = md.index("[@?]") + 2
    cursor = marked_query(draft.marked_local_context(md, at, "markdown"))
    assert cursor.local == "Rule-based and end-to-end systems." and focus_text(cursor)[0] == "and end-to-end"
