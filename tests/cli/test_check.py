"""``citewise check DRAFT...`` end to end (issue 27): the console command on a draft and a ``.bib``
written here from real SIGIR 2017 entries of ACM-CR, some of them made up from the others (another
paper's DOI, another paper's authors, a malformed DOI, a key defined twice, an entry that does not
parse, a wrong year, a key never defined, a real paper cited in a sentence about something else),
checked against the store of SIGIR 2015-2019 and CHIIR (``lsp_store``)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ACM_DL, require

pytestmark = [pytest.mark.slow]

SIGIR_2017 = ACM_DL / "sigir" / "sigir-2017.bib"
ELSWEILER = "10.1145/3077136.3080826"  # Exploiting Food Choice Biases for Healthier Recipe Recommendation
XML_CNN = "10.1145/3077136.3080834"  # Deep Learning for Extreme Multi-Label Text Classification
SEVERITIES = {"error", "warning", "information", "hint"}

DRAFT = r"""\documentclass{article}
\title{Notes on retrieval and recommendation}
\begin{document}
Neural ranking models can be trained with weak supervision from BM25 labels \cite{dehghani2017weak}.
Kernel pooling soft-matches query and document word embeddings for ad-hoc ranking \cite{xiong2017knrm}.

Recommending healthier recipes can exploit the biases in the food choices users make online \cite{xiong2017knrm}.

Variational autoencoders learn semantic hashing codes for text documents \cite{chaidaroon2017hashing}.
Stacked ensembles of bagged and boosted forests classify text \cite{campos2017stacking}.
Naïve 𝔼mbeddings are learned from relevance feedback \cite{zamani2017rbwe}.
Semantic query annotation infers the intents behind entity queries \cite{glater2017intent}.
Search results are diversified by attention over subtopics \cite{jiang2017diversify}, and see \cite{nobody2020ghost}.
Some say otherwise \cite{broken2017,ghost2021}.
\bibliography{refs}
\end{document}
"""

MARKDOWN = """---
title: Hashing notes
bibliography: refs.bib
---

Variational autoencoders learn semantic hashing codes for text documents [@chaidaroon2017hashing].
A paper nobody wrote [@nobody2020ghost].
"""

# The (key, code) pairs the draft deserves, and no others: the real papers cited where they fit
# (dehghani2017weak, xiong2017knrm on line 5) and the entries the store cannot judge stay quiet.
EXPECTED = {
    (7, "xiong2017knrm", "unlikely-citation"),
    (9, "chaidaroon2017hashing", "suspect-reference"),
    (10, "campos2017stacking", "suspect-reference"),
    (11, "zamani2017rbwe", "suspect-reference"),
    (12, "glater2017intent", "duplicate-entry"),
    (13, "jiang2017diversify", "metadata-mismatch"),
    (13, "nobody2020ghost", "unknown-key"),
}
BROKEN = "@inproceedings{broken2017,\nauthor = {Doe, Jane}ne and Roe, Rita},\ntitle = {A Broken Entry},\nyear = {2017}\n}\n"
GHOST = (
    "@article{ghost2021,\nauthor = {Nobody, Nemo},\ntitle = {Retrieval of Papers That Were Never Written "
    "Anywhere},\njournal = {Journal of Imaginary Results},\nyear = {2021}\n}\n"
)


def entry(doi: str, key: str) -> str:
    """The SIGIR 2017 entry of ``doi`` as ACM's export has it, under the key ``key``."""
    text = require(SIGIR_2017).read_text(encoding="utf-8")
    start = text.rindex("@", 0, text.index("{" + doi + ","))
    return text[start : text.index("\n}\n", start) + 3].replace("{" + doi + ",", "{" + key + ",", 1)


def _author_line(bib_entry: str) -> str:
    return re.search(r"^author = \{.*\},$", bib_entry, re.M).group(0)


def bib_entries(broken: bool = True) -> list[str]:
    hashing = entry("10.1145/3077136.3080816", "chaidaroon2017hashing")
    stacking = entry("10.1145/3077136.3080815", "campos2017stacking")
    other_authors = _author_line(entry("10.1145/3077136.3080806", "shi2017jointly"))
    intent = entry("10.1145/3077136.3080825", "glater2017intent")
    return [
        entry("10.1145/3077136.3080832", "dehghani2017weak"),
        entry("10.1145/3077136.3080809", "xiong2017knrm"),
        hashing.replace("doi = {10.1145/3077136.3080816}", "doi = {" + XML_CNN + "}"),  # another paper's DOI
        *([BROKEN] if broken else []),  # does not parse: the entries after it are still checked
        stacking.replace(_author_line(stacking), other_authors),  # another paper's authors
        entry("10.1145/3077136.3080831", "zamani2017rbwe").replace(
            "doi = {10.1145/3077136.3080831}", "doi = {10.11/3077136.3080831}"
        ),  # a malformed DOI
        intent,
        entry("10.1145/3077136.3080805", "jiang2017diversify").replace("year = {2017}", "year = {2016}"),
        intent,  # the same key twice
        GHOST,  # a paper the store does not hold (reported only with --enable not-in-store)
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, lsp_store: Path) -> Path:
    """A private copy of the SIGIR/CHIIR store with its search index."""
    folder = tmp_path_factory.mktemp("check-store")
    shutil.copy2(lsp_store, folder / lsp_store.name)
    shutil.copytree(Path(f"{lsp_store}.bm25"), folder / f"{lsp_store.name}.bm25")
    return folder / lsp_store.name


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    (tmp_path / "draft.tex").write_text(DRAFT, encoding="utf-8")
    (tmp_path / "refs.bib").write_text("\n".join(bib_entries()), encoding="utf-8")
    return tmp_path


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed ``citewise`` script, as users run it (see tests/cli/test_lsp_cli.py)."""
    script = Path(sys.executable).with_name("citewise")
    cmd = (
        [str(script)]
        if script.exists()
        else [sys.executable, "-c", "import sys, citewise.cli as c; sys.exit(c.main())"]
    )
    return subprocess.run(
        [*cmd, "check", *args], capture_output=True, text=True, timeout=180, cwd=cwd, encoding="utf-8"
    )


def json_rows(proc: subprocess.CompletedProcess[str]) -> list[dict]:
    """Every stdout line is one finding (no summary line in --json mode)."""
    return [json.loads(line) for line in proc.stdout.splitlines()]


def at(text: str, line: int, column: int) -> str:
    """The draft text from a 1-based line and column (columns count characters)."""
    return text.split("\n")[line - 1][column - 1 :]


def bib_line(key: str, folder: Path) -> int:
    lines = (folder / "refs.bib").read_text(encoding="utf-8").split("\n")
    return next(i for i, ln in enumerate(lines, 1) if ln.startswith("@") and "{" + key + "," in ln)


def test_json_findings_point_at_the_cited_keys(work: Path, store: Path) -> None:
    proc = check("draft.tex", "--store", str(store), "--json", cwd=work)
    assert proc.returncode == 1, proc.stderr
    rows = json_rows(proc)
    assert {(r["line"], r["key"], r["code"]) for r in rows} == EXPECTED
    for r in rows:
        assert {"file", "line", "column", "key", "code", "severity", "message", "suggested"} <= r.keys()
        assert r["file"] == "draft.tex" and r["severity"] in SEVERITIES and r["message"]
        assert at(DRAFT, r["line"], r["column"]).startswith(r["key"] + "}"), r  # 1-based, at the key
    by = {r["key"]: r for r in rows}
    # Columns count characters: "Naïve 𝔼mbeddings" is 16 UTF-16 units before the key, 15 characters.
    assert by["zamani2017rbwe"]["column"] == DRAFT.split("\n")[10].index("zamani2017rbwe") + 1
    unlikely = by["xiong2017knrm"]
    assert (unlikely["severity"], unlikely["suggested"]) == ("hint", ELSWEILER)
    assert unlikely["suggested_key"] == "elsweiler2017exploiting"
    doi = by["chaidaroon2017hashing"]
    assert doi["severity"] == "warning" and doi["suggested"] == XML_CNN
    assert "Deep Learning for Extreme Multi-Label Text Classification" in doi["message"]
    assert (doi["bib_file"], doi["bib_line"]) == ("refs.bib", bib_line("chaidaroon2017hashing", work))
    assert "authors (Shi, Lam, Jameel et al.)" in by["campos2017stacking"]["message"]
    assert by["campos2017stacking"]["suggested"] == "10.1145/3077136.3080815"
    assert "malformed" in by["zamani2017rbwe"]["message"] and by["zamani2017rbwe"]["suggested"] == ""
    assert "defined 2 times" in by["glater2017intent"]["message"]
    mismatch = by["jiang2017diversify"]
    assert (mismatch["severity"], mismatch["update"]) == ("information", {"year": "2017"})
    assert by["nobody2020ghost"]["suggested"] == "" and "bib_file" not in by["nobody2020ghost"]
    # The broken entry: one line with its place, and the entries after it were still checked.
    broken = [ln for ln in proc.stderr.splitlines() if "broken2017" in ln]
    assert broken == [
        f"refs.bib:{bib_line('broken2017', work)}: error: broken entry '@inproceedings{{broken2017,': "
        "syntax error (unbalanced braces or missing comma?)"
    ]
    assert "Traceback" not in proc.stderr


def test_human_report_and_exit_status(work: Path, store: Path) -> None:
    proc = check("draft.tex", "--store", str(store), cwd=work)
    assert proc.returncode == 1, proc.stderr
    *lines, summary = proc.stdout.splitlines()
    pattern = re.compile(
        r"^draft\.tex:(\d+):(\d+): (error|warning|information|hint): \[([a-z-]+)\] (\S+): (.+)$"
    )
    found = set()
    for line in lines:
        m = pattern.match(line)
        assert m, line
        row, col, _sev, code, key, _msg = m.groups()
        assert at(DRAFT, int(row), int(col)).startswith(key)
        found.add((int(row), key, code))
    assert found == EXPECTED
    assert any(
        ln.startswith("draft.tex:7:") and ln.endswith("(suggested: elsweiler2017exploiting)") for ln in lines
    )
    assert any(
        "[suspect-reference] chaidaroon2017hashing:" in ln and "(suggested: liu2017deep)" in ln
        for ln in lines
    )
    assert summary == (
        "1 draft checked: 7 findings (1 unknown-key, 3 suspect-reference, 1 duplicate-entry, "
        "1 metadata-mismatch, 1 unlikely-citation); 1 broken .bib entry"
    )
    # Nothing at warning level: 0, with the information finding still listed.
    (work / "refs.bib").write_text("\n".join(bib_entries(broken=False)), encoding="utf-8")
    (work / "fine.tex").write_text(
        "\n".join(DRAFT.split("\n")[:5] + DRAFT.split("\n")[12:13] + [r"\bibliography{refs}"]).replace(
            r", and see \cite{nobody2020ghost}", ""
        ),
        encoding="utf-8",
    )
    proc = check("fine.tex", "--store", str(store), cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [ln.split(": ")[1] for ln in proc.stdout.splitlines()[:-1]] == ["information"]
    assert proc.stdout.splitlines()[-1] == "1 draft checked: 1 finding (1 metadata-mismatch)"
    proc = check("fine.tex", "--store", str(store), "--disable", "metadata-mismatch", cwd=work)
    assert (proc.returncode, proc.stdout) == (0, "1 draft checked: no findings\n")


def test_enable_and_disable(work: Path, store: Path) -> None:
    proc = check(
        "draft.tex", "--store", str(store), "--json", "--disable", "suspect-reference",
        "--disable", "unlikely-citation,duplicate-entry", cwd=work,
    )  # fmt: skip
    assert {(r["key"], r["code"]) for r in json_rows(proc)} == {
        ("jiang2017diversify", "metadata-mismatch"),
        ("nobody2020ghost", "unknown-key"),
    }
    assert proc.returncode == 1  # unknown-key is a warning
    proc = check("draft.tex", "--store", str(store), "--json", "--enable", "not-in-store", cwd=work)
    rows = json_rows(proc)
    ghost = [r for r in rows if r["code"] == "not-in-store"]
    assert [(r["key"], r["severity"]) for r in ghost] == [("ghost2021", "information")]
    assert {(r["line"], r["key"], r["code"]) for r in rows} - {(14, "ghost2021", "not-in-store")} == EXPECTED
    for flag in ("--enable", "--disable"):
        proc = check("draft.tex", "--store", str(store), flag, "made-up-check", cwd=work)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.splitlines() == [
            f"citewise: error: {flag} 'made-up-check': no such check (known: unknown-key, "
            "suspect-reference, duplicate-entry, metadata-mismatch, not-in-store, unlikely-citation)"
        ]


def test_bad_drafts_get_one_line_and_the_others_are_checked(work: Path, store: Path) -> None:
    (work / "notes.txt").write_text(r"Not a draft \cite{xiong2017knrm}.", encoding="utf-8")
    (work / "draft.md").write_text(MARKDOWN, encoding="utf-8")
    proc = check(
        "missing.tex", "draft.tex", "notes.txt", "draft.md", "--store", str(store), "--json", cwd=work
    )
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("citewise: error:")]
    assert errors[0] == "citewise: error: missing.tex: no such file; not checked"
    assert errors[1].startswith("citewise: error: notes.txt: not a draft citewise reads (LaTeX or Markdown:")
    assert ".tex" in errors[1] and ".md" in errors[1] and ".qmd" in errors[1] and len(errors) == 2
    # The .bib both drafts share: its broken entry is reported once.
    assert sum("broken2017" in ln for ln in proc.stderr.splitlines()) == 1
    rows = json_rows(proc)
    assert {(r["line"], r["key"], r["code"]) for r in rows if r["file"] == "draft.tex"} == EXPECTED
    md = [(r["line"], r["key"], r["code"]) for r in rows if r["file"] == "draft.md"]
    assert md == [(6, "chaidaroon2017hashing", "suspect-reference"), (7, "nobody2020ghost", "unknown-key")]
    for r in rows:
        source = DRAFT if r["file"] == "draft.tex" else MARKDOWN
        assert at(source, r["line"], r["column"]).startswith(r["key"])
    assert "Traceback" not in proc.stderr
    text = check("missing.tex", "draft.tex", "notes.txt", "draft.md", "--store", str(store), cwd=work)
    assert text.stdout.splitlines()[-1].endswith("; 1 broken .bib entry; 2 not checked")
    assert text.stdout.splitlines()[-1].startswith("2 drafts checked: 9 findings")


def test_missing_or_empty_store_says_what_other_commands_say(work: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.sqlite")
    proc = check("draft.tex", "--store", missing, cwd=work)
    search = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, citewise.cli as c; sys.exit(c.main())",
            "search",
            "x",
            "--store",
            missing,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == search.stderr.splitlines() != []
    assert "no paper store here" in proc.stderr and not Path(missing).exists()


def test_bib_option_and_nothing_written(
    work: Path, store: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``--bib`` for a draft that names no bibliography; and ``check`` writes nothing: not the
    store, not its missing search index (built in memory), not the draft's folder."""
    bare = tmp_path_factory.mktemp("bare-store") / "papers.sqlite"
    shutil.copy2(store, bare)  # no search index beside it
    lib = work / "lib"
    lib.mkdir()
    (work / "refs.bib").rename(lib / "library.bib")
    (work / "draft.tex").write_text(DRAFT.replace(r"\bibliography{refs}", ""), encoding="utf-8")
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in [*work.rglob("*"), bare] if p.is_file()}
    proc = check("draft.tex", "--store", str(bare), "--json", cwd=work)
    assert proc.returncode == 1
    assert "draft.tex: names no bibliography and there is no references.bib (pass --bib FILE)" in proc.stderr
    assert {r["code"] for r in json_rows(proc)} == {"unknown-key"} and len(json_rows(proc)) == 10
    proc = check("draft.tex", "--store", str(bare), "--json", "--bib", "lib/library.bib", cwd=work)
    assert proc.returncode == 1, proc.stderr
    rows = json_rows(proc)
    assert {(r["line"], r["key"], r["code"]) for r in rows} == EXPECTED  # the fit check too
    assert {r["bib_file"] for r in rows if "bib_file" in r} == {"lib/library.bib"}
    assert "building it in memory" in proc.stderr
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in [*work.rglob("*"), bare] if p.is_file()}
    assert after == before
    assert sorted(p.name for p in bare.parent.iterdir()) == ["papers.sqlite"]
