"""TeX / HTML markup to Unicode: the cases real exports contain."""

import pytest

from citewise.indexer.texclean import strip_html, tex_to_unicode


@pytest.mark.parametrize(
    ("tex", "expected"),
    [
        (r"Caf\'e", "Café"),
        (r"Caf\'{e}", "Café"),
        (r"Caf{\'e}", "Café"),
        (r"{\"O}zg{\"u}r", "Özgür"),
        (r"\"{o}", "ö"),
        (r"Fran\c{c}ois", "François"),
        (r"Fran\c cois", "François"),
        (r"Dvo\v{r}\'{a}k", "Dvořák"),
        (r"Erd\H{o}s", "Erdős"),
        (r"Ma\~{n}ana", "Mañana"),
        (r"na\"{\i}ve", "naïve"),
        (r"Stra\ss e", "Straße"),
        (r"{\o}ystein", "øystein"),
        (r"\L{}ukasz", "Łukasz"),
        (r"Bj\"{o}rn {\AA}str\"{o}m", "Björn Åström"),
        ("{{BERT}}: Pre-training of Deep", "BERT: Pre-training of Deep"),
        ("x<sup>2</sup> and H<sub>2</sub>O", "x2 and H2O"),
        ("<i>Italic</i> &amp; <b>bold</b>", "Italic & bold"),
        (r"50\% of \$10 \& more \#1 a\_b", "50% of $10 & more #1 a_b"),
        (r"$\alpha$-$\beta$ pruning", "α-β pruning"),
        (r"O($n \log n$) time", "O(n log n) time"),
        (r"\emph{Deep} \textbf{learning}", "Deep learning"),
        (r"{\em emphasised} text", "emphasised text"),
        ("pages 1--10 and a---b", "pages 1–10 and a—b"),
        ("non~breaking   spaces\n and lines", "non breaking spaces and lines"),
        (r"3\texttimes{}3 grid", "3×3 grid"),
        ("", ""),
        ("plain text stays", "plain text stays"),
    ],
)
def test_tex_to_unicode(tex: str, expected: str) -> None:
    assert tex_to_unicode(tex) == expected


def test_strip_html_keeps_text_without_tags() -> None:
    assert strip_html("a < b and c > d") == "a < b and c > d"
    assert strip_html("<p>One</p><p>Two &lt;3</p>") == "OneTwo <3"


def test_superscripts_the_writer_spells_read_back() -> None:
    """The BibTeX writer writes "²" as \\textsuperscript{2}: reading it back must give "²", or an
    entry no longer matches its own stored record (issue 27's checks)."""
    from citewise.indexer.tex_escape import tex_title

    for title in ("Learning with L² Regularisation", "E = mc²", "¹H NMR"):
        assert tex_to_unicode(tex_title(title)) == title
    assert tex_to_unicode(r"H\textsubscript{2}O") == "H₂O"
    assert tex_to_unicode(r"the 5\textsuperscript{th} edition") == "the 5th edition"
