"""Inserted BibTeX compiles: 300 real papers through pdfLaTeX + BibTeX (plain, natbib) and biber.

The papers are drawn (seeded) from the real corpora and imported with the project's own
importers into a temporary store, exactly as a user's store is built:

* ACM-CR BibTeX exports: every kind of markup the export contains is selected on purpose
  (``&amp;`` and other entities, ``<sup>``/``<sub>``/``<i>``/``<b>``/``<scp>`` tags, MathML and
  ``<tex-math>``, ``$...$`` math, TeX accents, Unicode dashes in ``pages``, non-ASCII text,
  ``~``), the rest at random;
* ACL Anthology XML files (random papers of random small volumes);
* a JSON Lines file this test writes: real ACM titles and abstracts as a JSON dump would carry
  them (HTML and all), plus hand-written hostile records (unbalanced braces, ``%``, ``#``,
  ``$``, backslashes, odd URLs and DOIs, usable and unusable ``bibtex_key`` values).

Their insertion entries (:func:`bibtex_entry`, default fields) go into one ``.bib`` that a
document cites in full, built three ways: ``plain`` with BibTeX, ``plainnat`` with natbib and
BibTeX, biblatex with biber. A fourth build keeps every field (``fields="full"``) and prints
abstracts and keywords, so the cleaning of the text that the default leaves out is typeset too.
Each build must end with zero errors and every entry in the bibliography.

Skips, saying why, when the shared data or a TeX tool is missing (Debian: ``texlive-latex-base
texlive-bibtex-extra biber``).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from citewise.indexer.bibtex_writer import bibtex_entry, format_entry
from citewise.indexer.importer import import_sources
from citewise.indexer.store import Store
from citewise.indexer.tex_escape import char_to_tex, tex_title

from ..conftest import ACL_XML, ACM_DL, require

SEED = 15
N_ACM, N_ACL, N_JSONL = 200, 60, 40
PER_KIND = 6  # ACM entries picked on purpose for each kind of markup

# Kinds of markup in ACM-CR entries, as the sample selects and counts them: a pattern searched in
# the whole entry, or only in the lines of the given fields (ACM writes one field per line).
MARKUP: dict[str, tuple[tuple[str, ...], re.Pattern[str]]] = {
    "html entity (&amp; ...)": ((), re.compile(r"&(?:amp|lt|gt|quot|nbsp|#[0-9]+);")),
    "<sup>": ((), re.compile(r"<sup>")),
    "<sub>/<inf>": ((), re.compile(r"<sub>|<inf>")),
    "<i>/<em>/<italic>": ((), re.compile(r"<i>|<em>|<italic>")),
    "<b>/<strong>": ((), re.compile(r"<b>|<strong>")),
    "<scp>": ((), re.compile(r"<scp>")),
    "<u>/<underline>": ((), re.compile(r"<u>|<underline>")),
    "MathML / <tex-math>": ((), re.compile(r"<inline-formula|<tex-math|<inlineequation|<mml:")),
    "other HTML tag": ((), re.compile(r"<(?:span|p|a|br|small|tt|div)\b")),
    "$math$": ((), re.compile(r"\$[^$\n]{1,80}\$")),
    "TeX accent": ((), re.compile(r"\\['`^\"~=.]|\\[cvuHrk]\{")),
    "TeX letter (\\ss, \\o, \\i ...)": ((), re.compile(r"\\(?:ss|o|O|l|L|ae|AE|i|dh|TH)\b")),
    "TeX command (\\texttimes ...)": ((), re.compile(r"\\(?:texttimes|log|alpha|frac|mathbb|emph|textit)\b")),
    "Unicode dash in pages": (("pages",), re.compile("[\u2013\u2014]")),
    "non-ASCII text": (("title", "author", "abstract"), re.compile(r"[^\x00-\x7f]")),
    "~": ((), re.compile(r"~")),
    "bare & % # _": (("title", "abstract"), re.compile(r"&(?![a-z#0-9]+;)|(?<!\\)[%#_]")),
}
# A character each kind needs: a cheap test that spares most of 110k regex searches per kind.
HINTS = {
    "html entity (&amp; ...)": "&",
    "$math$": "$",
    "~": "~",
    "bare & % # _": "&%#_",
    "Unicode dash in pages": "\u2013\u2014",
    "non-ASCII text": "",
}
for _kind in MARKUP:
    HINTS.setdefault(_kind, "\\" if _kind.startswith("TeX") else "<")


def _line(entry: str, name: str) -> str:
    start = entry.find("\n" + name + " = {")
    return "" if start == -1 else entry[start : entry.find("\n", start + 1) % (len(entry) + 1)]


def _has(entry: str, kind: str) -> bool:
    hint = HINTS[kind]
    if not entry.isascii() if not hint else any(c in entry for c in hint):
        fields, pattern = MARKUP[kind]
        return pattern.search("\n".join(_line(entry, f) for f in fields) if fields else entry) is not None
    return False


def _kinds(entry: str) -> list[str]:
    """The kinds of markup in one raw entry."""
    return [kind for kind in MARKUP if _has(entry, kind)]


# Hand-written JSON Lines records: the hostile cases a dump can hold.
HOSTILE = [
    {
        "title": "Unbalanced {braces} and } closing { opening",
        "authors": ["Brace, {Open"],
        "year": 2020,
        "venue": "Proc. of {X",
        "doi": "10.1000/a{b}c",
        "bibtex_key": "has space",
    },
    {
        "title": "100% of $5 & #1 in a_b with ^ and ~ and \\ backslash",
        "authors": ["Smith, Ann"],
        "year": 2021,
        "venue": "A & B Conference",
        "url": "https://example.org/a_b%20c#frag#x?q=1%",
        "bibtex_key": "Smith2021Percent",
        "pages": "10\u201320",
    },
    {
        "title": "Math $x^2$ and \\alpha and \\cite{x} and \\undefinedcommand",
        "authors": ["Müller, Jörg", "Łukasz, Ødegård"],
        "year": 2019,
        "venue": "Journal of \\LaTeX",
        "doi": "10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI4>3.0.CO;2-O",
        "type": "article",
        "bibtex_key": "10.1000/doi-as-key",
    },
    {
        "title": "Ünïcödé – dashes — quotes “x” ‘y’ … ellipsis, ½ ° © ™ µ ≤ ≥ ℝ 𝒫 ﬁ",
        "authors": ["Nguyễn, Văn Đức"],
        "year": 2018,
        "venue": "Ελληνικά? No: Greek αβγ ΔΩ",
        "keywords": ["naïve", "résumé"],
        "bibtex_key": "smith_2020",
    },
    {
        "title": "&lt;sup&gt;Entity-escaped&lt;/sup&gt; tags &amp; double &amp;amp; entities",
        "authors": ["O'Brien, Seán"],
        "year": 2017,
        "venue": "SIGIR '17",
        "arxiv": "arXiv:1706.03762v5",
        "type": "misc",
    },
    {
        "title": "Session {Details}? No: a paper about ``quotes'' and -- ligatures",
        "authors": ["Barnes and Noble"],
        "year": 2016,
        "venue": "Trailing backslash \\",
        "editor": "Doe, Jane and Roe, {Richard",
        "type": "inproceedings",
    },
    {
        "title": "A",
        "authors": [],
        "year": 1999,
        "venue": "",
        "note": "%%%%",
        "publisher": "}{",
        "type": "techreport",
    },
]


def _need_tools() -> None:
    missing = [t for t in ("pdflatex", "bibtex", "biber", "kpsewhich") if shutil.which(t) is None]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed (Debian: apt-get install texlive-latex-base "
            "texlive-bibtex-extra biber); skipping the BibTeX compile test"
        )
    for sty in ("natbib.sty", "biblatex.sty", "url.sty", "lmodern.sty"):
        if not subprocess.run(["kpsewhich", sty], capture_output=True, text=True).stdout.strip():
            pytest.skip(
                f"{sty} not installed (Debian: texlive-latex-base texlive-bibtex-extra lmodern); skipping"
            )


def _acm_entries() -> list[str]:
    entries: list[str] = []
    for path in sorted(require(ACM_DL).rglob("*.bib")):
        text = path.read_text(encoding="utf-8")
        entries.extend(e for e in re.split(r"\n(?=@)", text) if e.lstrip().startswith("@"))
    return entries


def _doi(entry: str) -> str:
    m = re.match(r"\s*@\w+\{([^,]*),", entry)
    return m.group(1).lower() if m else ""


def _sample_acm(rng: random.Random) -> tuple[list[str], list[str]]:
    """(entries for the BibTeX sample, other entries for the JSON Lines file): markup on purpose, then random."""
    entries = [e for e in _acm_entries() if "session details" not in e.lower()]
    chosen: dict[str, str] = {}
    for kind, hint in HINTS.items():
        # Candidates by the cheap test, in random order; the pattern only until PER_KIND are found.
        candidates = [e for e in entries if any(c in e for c in hint)] if hint else entries
        found = 0
        for i in rng.sample(range(len(candidates)), len(candidates)):
            if _has(candidates[i], kind):
                chosen.setdefault(_doi(candidates[i]), candidates[i])
                found += 1
                if found == PER_KIND:
                    break
    while len(chosen) < N_ACM:
        e = rng.choice(entries)
        chosen.setdefault(_doi(e), e)
    picked = list(chosen.values())[:N_ACM]
    rest = [e for e in rng.sample(entries, 400) if _doi(e) not in chosen]
    return picked, rest


def _field(entry: str, name: str) -> str:
    m = re.search(r"^" + name + r" = \{(.*)\},?$", entry, re.M)
    return m.group(1) if m else ""


def _jsonl_records(acm_rest: list[str], rng: random.Random) -> list[dict]:
    """Real ACM titles/abstracts as a JSON dump carries them (HTML included), and the hostile ones."""
    marked = [e for e in acm_rest if _kinds(_field(e, "title") + _field(e, "abstract"))]
    pool = marked + [e for e in acm_rest if e not in marked]
    records = []
    for i, e in enumerate(pool[: N_JSONL - len(HOSTILE)]):
        authors = [a.strip() for a in _field(e, "author").split(" and ") if a.strip()]
        records.append(
            {
                "id": f"acm{i}",
                "title": _field(e, "title"),
                "abstract": _field(e, "abstract"),
                "authors": authors,
                "year": _field(e, "year"),
                "venue": _field(e, "booktitle") or _field(e, "journal"),
                "pages": _field(e, "pages"),
                "publisher": _field(e, "publisher"),
                "url": _field(e, "url"),
                "type": "inproceedings" if e.startswith("@inproceedings") else "article",
            }
        )
    records.extend({"id": f"hostile{i}", **r} for i, r in enumerate(HOSTILE))
    rng.shuffle(records)
    return records


def _acl_files(rng: random.Random) -> list[Path]:
    files = sorted(p for p in require(ACL_XML).glob("*.xml") if 20_000 < p.stat().st_size < 400_000)
    return rng.sample(files, 6)


def _blg_errors(text: str) -> list[str]:
    errors = [m.group(0) for m in re.finditer(r"\(There (?:were|was) [0-9]+ error messages?\)", text)]
    errors += [
        line
        for line in text.splitlines()
        if re.search(r"Repeated entry|I was expecting|ERROR|I'm skipping", line)
    ]
    return errors


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, errors="replace", timeout=300)


def _latex(cwd: Path, doc: str) -> list[str]:
    proc = _run(["pdflatex", "-halt-on-error", "-interaction=nonstopmode", doc], cwd)
    log = (cwd / f"{doc}.log").read_text(encoding="utf-8", errors="replace")
    problems = [line for line in log.splitlines() if line.startswith("! ")]
    if proc.returncode != 0:
        problems.append(f"pdflatex {doc}: exit status {proc.returncode}")
    return problems


# Both font encodings real templates use: OT1, LaTeX's default (llncs, IEEEtran), and T1 (acmart,
# the ACL style). lmodern in both: its Type 1 fonts spare a fresh machine the T1/TS1 bitmap fonts
# METAFONT would otherwise make on the fly (slow, and not what is under test).
OT1 = "\\usepackage{lmodern}\n"
T1 = "\\usepackage[T1]{fontenc}\n\\usepackage{lmodern}\n"
DOCS: dict[str, tuple[str, str]] = {  # name -> (preamble, bibliography commands)
    "plain": (OT1, "\\bibliographystyle{plain}\n\\bibliography{refs}"),
    "natbib": (
        T1 + "\\usepackage{natbib}\n\\usepackage{url}",
        "\\bibliographystyle{plainnat}\n\\bibliography{refs}",
    ),
    "biblatex": (
        T1 + "\\usepackage[backend=biber]{biblatex}\n\\addbibresource{refs.bib}",
        "\\printbibliography",
    ),
    "biblatex-full": (
        OT1 + "\\usepackage[backend=biber]{biblatex}\n\\addbibresource{refs-full.bib}\n"
        "\\renewbibmacro*{finentry}{\\setunit{\\par}\\printfield{keywords}\\setunit{\\par}\\printfield{abstract}"
        "\\finentry}",
        "\\printbibliography",
    ),
    # Every character the writer spells in TeX (not those it leaves UTF-8), in both encodings.
    "chars-plain": (OT1, "\\bibliographystyle{plain}\n\\bibliography{chars}"),
    "chars-natbib": (
        T1 + "\\usepackage{natbib}\n\\usepackage{url}",
        "\\bibliographystyle{plainnat}\n\\bibliography{chars}",
    ),
    "chars-biblatex": (
        OT1 + "\\usepackage[backend=biber]{biblatex}\n\\addbibresource{chars.bib}",
        "\\printbibliography",
    ),
}


def _spelled_characters() -> list[str]:
    """Entries whose titles hold every character below U+3000 (and the math alphabets) that
    :func:`char_to_tex` spells in TeX, 40 to an entry."""
    chars = [chr(c) for c in [*range(0x20, 0x3000), *range(0x1D400, 0x1D800), *range(0xFB00, 0xFB07)]]
    spelled = [c for c in chars if c.isprintable() and (c.isascii() or char_to_tex(c) != c)]
    return [
        f"@misc{{chars{i},\n  author = {{Doe, Jane}},\n  title = {{{tex_title(' '.join(spelled[i : i + 40]))}}},\n"
        f"  year = {{{1000 + i}}}\n}}\n"
        for i in range(0, len(spelled), 40)
    ]  # (plainnat: 2000a...2000z, no more)


def _build(work: Path, name: str, keys: list[str]) -> dict:
    """One document citing every key, built with its toolchain: problems found, entries typeset."""
    preamble, bib = DOCS[name]
    # biblatex spends 25 ms on each \cite (7 s for 300); \nocite puts the entries in all the same.
    cite = "\\nocite" if "biblatex" in name else "\\cite"
    doc = f"doc-{name}"
    (work / f"{doc}.tex").write_text(
        "\\documentclass{article}\n"
        + preamble
        + "\n\\begin{document}\n"
        + "".join(f"{cite}{{{k}}}\n" for k in keys)
        + bib
        + "\n\\end{document}\n",
        encoding="utf-8",
    )
    t0 = time.perf_counter()
    problems = _latex(work, doc)
    if "biblatex" in name:
        proc = _run(["biber", doc], work)
        blg = (work / f"{doc}.blg").read_text(encoding="utf-8", errors="replace")
        problems += _blg_errors(blg) + ([f"biber exit status {proc.returncode}"] if proc.returncode else [])
        problems += [line for line in blg.splitlines() if "BibTeX subsystem" in line]
    else:
        proc = _run(["bibtex", doc], work)
        blg = (work / f"{doc}.blg").read_text(encoding="utf-8", errors="replace")
        problems += _blg_errors(blg) + (
            [f"bibtex exit status {proc.returncode}"] if proc.returncode > 1 else []
        )
    problems += _latex(work, doc)  # (a third run would only resolve the citation labels)
    bbl = (
        (work / f"{doc}.bbl").read_text(encoding="utf-8", errors="replace")
        if (work / f"{doc}.bbl").exists()
        else ""
    )
    items = len(re.findall(r"\\bibitem\b", bbl)) + len(re.findall(r"\\entry\{", bbl))
    return {"problems": problems, "items": items, "seconds": round(time.perf_counter() - t0, 1)}


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The sample imported, its entries written, and the four documents built once."""
    _need_tools()
    rng = random.Random(SEED)
    work = tmp_path_factory.mktemp("bibcompile")
    clock = [time.perf_counter()]
    timings: dict[str, float] = {}

    def lap(name: str) -> None:
        now = time.perf_counter()
        timings[name] = round(now - clock[0], 1)
        clock[0] = now

    acm, acm_rest = _sample_acm(rng)
    (work / "acm-sample.bib").write_text("\n\n".join(acm) + "\n", encoding="utf-8")
    with open(work / "dump.jsonl", "w", encoding="utf-8") as fh:
        for record in _jsonl_records(acm_rest, rng):
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    lap("sample")
    store = Store(work / "store.sqlite")
    import_sources(store, [work / "acm-sample.bib", work / "dump.jsonl", *_acl_files(rng)], workers=0)
    papers = list(store.iter_papers())
    by_source: dict[str, list] = {"bibtex": [], "jsonl": [], "acl": []}
    for p in papers:
        kind = "jsonl" if p.source.endswith(".jsonl") else "acl" if p.source.endswith(".xml") else "bibtex"
        by_source[kind].append(p)
    sample = by_source["bibtex"] + rng.sample(by_source["acl"], N_ACL) + by_source["jsonl"][:N_JSONL]
    taken: set[str] = set()
    entries, full = [], []
    for p in sample:
        key, entry = bibtex_entry(p, taken)
        taken.add(key)
        entries.append(entry)
        full.append(format_entry(p, key, fields="full"))
    lap("import")
    (work / "refs.bib").write_text("\n".join(entries), encoding="utf-8")
    (work / "refs-full.bib").write_text("\n".join(full), encoding="utf-8")
    keys = sorted(taken)
    chars = _spelled_characters()
    (work / "chars.bib").write_text("\n".join(chars), encoding="utf-8")
    char_keys = [f"chars{i * 40}" for i in range(len(chars))]
    # Two builds at a time: biber spends most of its time starting up.
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(
            zip(
                DOCS,
                pool.map(
                    lambda name: _build(work, name, char_keys if name.startswith("chars") else keys), DOCS
                ),
                strict=True,
            )
        )
    lap("builds")
    markup = Counter(kind for e in acm for kind in _kinds(e))
    return {
        "work": work,
        "sample": sample,
        "keys": keys,
        "char_keys": char_keys,
        "results": results,
        "markup": markup,
        "timings": timings,
        "by_source": Counter(p.source.rsplit(".", 1)[-1] for p in sample),
    }


def test_the_sample_is_real_and_covers_every_kind_of_markup(build: dict) -> None:
    assert len(build["sample"]) == N_ACM + N_ACL + N_JSONL == 300
    assert build["by_source"] == {"bib": N_ACM, "xml": N_ACL, "jsonl": N_JSONL}
    assert len(build["keys"]) == 300  # unique keys
    print("\nmarkup kinds in the ACM sample:", dict(build["markup"]))
    print("seconds:", build["timings"])
    for kind in MARKUP:
        assert build["markup"][kind] >= 3, f"the sample has too few entries with {kind}"
    # Readable keys, no DOI used as a key.
    assert not [k for k in build["keys"] if "/" in k or k.startswith("10.")]


@pytest.mark.parametrize("toolchain", [name for name in DOCS if not name.startswith("chars")])
def test_every_entry_compiles(build: dict, toolchain: str) -> None:
    result = build["results"][toolchain]
    print(
        f"\n{toolchain}: {result['items']} of {len(build['keys'])} entries in the bibliography "
        f"({result['seconds']} s)"
    )
    assert result["problems"] == [], f"{toolchain} build in {build['work']}: " + "\n".join(
        result["problems"][:20]
    )
    assert result["items"] == len(build["keys"])


@pytest.mark.parametrize("toolchain", [name for name in DOCS if name.startswith("chars")])
def test_every_character_the_writer_spells_compiles(build: dict, toolchain: str) -> None:
    result = build["results"][toolchain]
    assert result["problems"] == [], f"{toolchain} build in {build['work']}: " + "\n".join(
        result["problems"][:20]
    )
    assert result["items"] == len(build["char_keys"])


def test_every_math_command_the_writer_keeps_is_kernel_latex(tmp_path: Path) -> None:
    """Math survives cleaning only with commands the LaTeX kernel defines (no amssymb, latexsym)."""
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex not installed (Debian: texlive-latex-base); skipping")
    from citewise.indexer import tex_math

    names = sorted(tex_math._MATH_SYMBOLS) + sorted(tex_math._MATH_ARG1) + sorted(tex_math._MATH_ALIASES)
    lines = []
    for name in names:
        math = tex_math.clean_math(f"\\{name}{{x}}" if name in tex_math._MATH_ARG1 else f"\\{name}")
        if math is not None:
            lines.append(f"{name}: ${math}$\\par")
    (tmp_path / "m.tex").write_text(
        "\\documentclass{article}\n" + OT1 + "\\begin{document}\n" + "\n".join(lines) + "\n\\end{document}\n",
        encoding="utf-8",
    )
    assert len(lines) > 200
    assert _latex(tmp_path, "m") == []
