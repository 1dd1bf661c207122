"""The pure .bib edits behind the reference checks' fixes (server/bib_edits.py): a field's value
set in place whatever its form, a missing field added in the entry's style, the whole entry
replaced, and every byte the fix does not change kept as it was."""

from __future__ import annotations

import re

import pytest

from citewise.server.bib_edits import apply, layout, replace_entry, update_fields


def span_of(text: str, key: str) -> tuple[int, int]:
    """``(start, end)`` of the entry with ``key`` (its ``@`` to its closing delimiter, included)."""
    m = re.search(r"@\w+\s*([{(])" + re.escape(key) + ",", text)
    assert m is not None
    opener = m.group(1)
    closer = "}" if opener == "{" else ")"
    depth = 0
    for i in range(m.start(1), len(text)):
        depth += {opener: 1, closer: -1}.get(text[i], 0)
        if depth == 0:
            return m.start(), i + 1
    raise AssertionError("unclosed")


def update(text: str, key: str, *values: tuple[str, str]) -> str:
    start, end = span_of(text, key)
    return apply(text, update_fields(text, start, end, values))


BEFORE = "% my library\n@string{acm = {ACM}}\n\n"
AFTER = "\n\n@misc{next, title = {Untouched}}\n"


@pytest.mark.parametrize(
    ("entry", "fields", "expected"),
    [
        # a braced value with nested braces
        (
            "@inproceedings{k,\n  title = {{BERT} for {IR} {a {b} c}},\n  year = {2019},\n}",
            [("title", "{Passage Re-ranking with {BERT}}")],
            "@inproceedings{k,\n  title = {Passage Re-ranking with {BERT}},\n  year = {2019},\n}",
        ),
        # a quoted value (braces and an escaped quote inside it), replaced with the store's braced one
        (
            '@article{k,\n  title = "A {"}quoted{"} {Title}",\n  year = 2019\n}',
            [("title", "{A Title}")],
            "@article{k,\n  title = {A Title},\n  year = 2019\n}",
        ),
        # a bare number
        (
            "@article{k,\n  year = 2019,\n  title = {T}\n}",
            [("year", "2018")],
            "@article{k,\n  year = 2018,\n  title = {T}\n}",
        ),
        # a concatenation and a macro
        (
            '@article{k,\n  journal = acm # " Journal",\n  year = 2019\n}',
            [("journal", "{Information Retrieval Journal}")],
            "@article{k,\n  journal = {Information Retrieval Journal},\n  year = 2019\n}",
        ),
        # the field's name in another case, odd spacing kept around it
        (
            "@misc{k,\n\tTITLE={Old} ,\n\tyear=2001}",
            [("title", "{New}")],
            "@misc{k,\n\tTITLE={New} ,\n\tyear=2001}",
        ),
        # missing field, last field without a trailing comma: the comma goes after the last value
        (
            "@article{k,\n  title = {T},\n  year = 2019\n}",
            [("author", "{Doe, Jane}")],
            "@article{k,\n  title = {T},\n  year = 2019,\n  author = {Doe, Jane}\n}",
        ),
        # missing field after a trailing comma: added in the entry's indent, trailing comma kept
        (
            "@article{k,\n    title = {T},\n    year = {2019},\n}",
            [("author", "{Doe, Jane}"), ("booktitle", "{SIGIR}")],
            "@article{k,\n    title = {T},\n    year = {2019},\n    author = {Doe, Jane},\n    booktitle = {SIGIR},\n}",
        ),
        # ACM's style: no indent, "field = {v}"
        (
            "@inproceedings{k,\nauthor = {A, B},\ntitle = {T},\nyear = {2018}\n}",
            [("year", "{2019}"), ("booktitle", "{SIGIR '19}")],
            "@inproceedings{k,\nauthor = {A, B},\ntitle = {T},\nyear = {2019},\nbooktitle = {SIGIR '19}\n}",
        ),
        # one-line entry with parentheses
        (
            "@misc(k, title = {T}, year = 2019)",
            [("year", "2020"), ("note", "{x}")],
            "@misc(k, title = {T}, year = 2020, note = {x})",
        ),
        # an entry with no field at all
        ("@misc{k,\n}", [("year", "2020")], "@misc{k,\n  year = 2020,\n}"),
        # a value the entry already has: nothing to do
        ("@misc{k, year = 2019}", [("year", "2019")], "@misc{k, year = 2019}"),
    ],
)
def test_update_fields_changes_only_the_values(
    entry: str, fields: list[tuple[str, str]], expected: str
) -> None:
    text = BEFORE + entry + AFTER
    got = update(text, "k", *fields)
    assert got == BEFORE + expected + AFTER


def test_update_fields_in_a_crlf_file_keeps_crlf() -> None:
    entry = "@article{k,\r\n  title = {T},\r\n  year = 2019\r\n}"
    text = BEFORE.replace("\n", "\r\n") + entry + AFTER.replace("\n", "\r\n")
    got = update(text, "k", ("year", "2018"), ("author", "{Doe, Jane}"))
    assert got == BEFORE.replace("\n", "\r\n") + (
        "@article{k,\r\n  title = {T},\r\n  year = 2018,\r\n  author = {Doe, Jane}\r\n}"
    ) + AFTER.replace("\n", "\r\n")
    assert "\n" not in got.replace("\r\n", "")


def test_the_edits_are_small_and_never_touch_each_other() -> None:
    """A replaced last value and an insertion at its end are one edit (clients may order edits at one
    position either way); other edits are only the values they change."""
    text = "@article{k,\n  title = {T},\n  year = 2019\n}"
    edits = update_fields(text, 0, len(text), [("title", "{U}"), ("year", "2018"), ("author", "{A}")])
    title, year = text.index("{T}"), text.index("2019")
    assert edits == [(title, title + 3, "{U}"), (year, year + 4, "2018,\n  author = {A}")]
    assert all(a[1] < b[0] for a, b in zip(edits, edits[1:], strict=False))


def test_a_field_defined_twice_gets_both_values() -> None:
    text = "@misc{k, year = 2019, year = {2017}}"
    assert (
        apply(text, update_fields(text, 0, len(text), [("year", "2018")]))
        == "@misc{k, year = 2018, year = 2018}"
    )


@pytest.mark.parametrize(
    "entry",
    [
        "@article{k, title = {unbalanced}",  # no closing brace
        "@article{k, title = {a}} garbage}",
        "@article{k, title {a}}",  # no "="
        "not an entry",
    ],
)
def test_an_entry_that_cannot_be_read_gets_no_edit(entry: str) -> None:
    assert update_fields(entry, 0, len(entry), [("year", "2018")]) == []


def test_layout_reads_fields_in_order() -> None:
    text = '@misc{k, a = 1, b = "x, {y}", c = {z} # q}'
    lay = layout(text, 0, len(text))
    assert lay is not None
    assert [f.name for f in lay.fields] == ["a", "b", "c"]
    assert [text[f.value_start : f.value_end] for f in lay.fields] == ["1", '"x, {y}"', "{z} # q"]


def test_replace_entry_keeps_what_is_around_it() -> None:
    entry = "@misc{fake,\n  title = {Made Up},\n}"
    text = BEFORE + entry + AFTER
    start, end = span_of(text, "fake")
    new = "@inproceedings{fake,\n  title = {Real},\n  year = {2018}\n}\n"
    got = apply(text, [replace_entry(text, start, end, new)])
    assert got == BEFORE + new.rstrip("\n") + AFTER
    crlf = text.replace("\n", "\r\n")
    start, end = span_of(crlf, "fake")
    got = apply(crlf, [replace_entry(crlf, start, end, new)])
    assert got == (BEFORE + new.rstrip("\n") + AFTER).replace("\n", "\r\n")
