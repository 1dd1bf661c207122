"""Citewise in Emacs + eglot (Debian 12: ``apt-get install emacs-nox elpa-eglot``), in batch mode.

The eglot configuration of ``docs/editors.md`` is loaded as written; ``tests/editors/eglot_drive.el``
opens the draft (latex-mode, eglot-ensure), asks for completion at a ``\\cite{}`` placeholder,
takes the "Cite: Title (Year)" action through ``eglot-code-actions`` (answering its questions),
takes the same action again at the second placeholder, and writes what it saw to a JSON file.
Nothing is saved: the entry must be in the ``.bib`` buffer, once. At the third placeholder it reads
what completion shows (eglot's annotations, the ``*Completions*`` buffer): each key with its title
line, and two versions of one paper (``versions.bib``, as in tests/editors/test_neovim_menu.py) told apart.
Skips without Emacs or eglot.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from citewise.server.completion.labels import BIB_MARK

from .test_neovim import (
    NVIM_TIMEOUT,
    OWN_BIB,
    TIMEOUT_MS,
    documented_config,
    editor_env,
    make_workspace,
    small_store,  # noqa: F401  (a fixture)
)
from .test_neovim_menu import BULLETIN_LINE, CONFERENCE_LINE, KEY, write_versions

pytestmark = [pytest.mark.slow]

DRIVER = Path(__file__).with_name("eglot_drive.el")


def emacs_with_eglot() -> str | None:
    emacs = shutil.which("emacs")
    if emacs is None:
        return None
    probe = subprocess.run(
        [emacs, "--batch", "-q", "--eval", '(princ (if (require \'eglot nil t) "yes" "no"))'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return emacs if probe.stdout.strip().endswith("yes") else None


def test_eglot_documented_configuration(tmp_path: Path, small_store: Path) -> None:  # noqa: F811
    emacs = emacs_with_eglot()
    if emacs is None:
        pytest.skip("no Emacs with eglot (apt-get install emacs-nox elpa-eglot); skipping")
    ws, store, placeholders = make_workspace(tmp_path, small_store)
    write_versions(ws, store)
    if shutil.which("git") is None:
        pytest.skip("git is needed: eglot's workspace is the version-control root")
    subprocess.run(["git", "init", "-q", str(ws)], check=True, timeout=60)
    snippet = tmp_path / "citewise-eglot.el"
    snippet.write_text(documented_config("eglot"))
    out = tmp_path / "eglot-result.json"
    params = tmp_path / "eglot-params.json"
    params.write_text(
        json.dumps(
            {
                "draft": str(ws / "draft.tex"),
                "bib": str(ws / "refs.bib"),
                "out": str(out),
                "placeholders": placeholders,
                "timeout_ms": TIMEOUT_MS,
            }
        )
    )
    env = editor_env(tmp_path, store, CITEWISE_EGLOT_PARAMS=str(params), HOME=str(tmp_path / "home"))
    # -q, not -Q: Debian's site-start puts its elpa packages (eglot) on the load path.
    proc = subprocess.run(
        [emacs, "--batch", "-q", "-l", str(snippet), "-l", str(DRIVER)],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=NVIM_TIMEOUT,
    )
    assert out.exists(), (
        f"Emacs wrote no result (exit {proc.returncode}): {proc.stdout[-3000:]} {proc.stderr[-3000:]}"
    )
    r = json.loads(out.read_text())
    assert "error" not in r, (r, proc.stderr[-3000:])
    assert r["mode"] == "latex-mode" and Path(r["root"]) == ws
    assert len(r["labels"]) >= 5
    assert r["title"].startswith("Cite: ") and r["title"] in r["offered"]
    key = re.search(r"\\cite\{([^}]+)\}", r["line1"])[1]
    assert r["line1"].endswith("contrastive losses \\cite{" + key + "}.")
    assert r["bib_after_action"].startswith(OWN_BIB) and r["bib_modified"] is True
    assert r["line2"].endswith("small world graphs \\cite{" + key + "}.")
    assert len(re.findall(r"@\w+\{" + re.escape(key) + ",", r["bib_final"])) == 1, r["bib_final"][
        len(OWN_BIB) :
    ]
    assert (ws / "refs.bib").read_text() == OWN_BIB  # nothing saved

    # What completion shows: the key, annotated with its title line (eglot annotates with `detail`).
    assert len(r["menu"]) >= 5 and all(a and a.strip() != "Reference" for _, a in r["menu"]), r["menu"]
    # Two candidates of one key (their annotations marked "✓ in .bib" once a code action cited it).
    versions = sorted(a.removeprefix(" ").removeprefix(BIB_MARK) for c, a in r["menu"] if c == KEY)
    assert versions == sorted([CONFERENCE_LINE, BULLETIN_LINE]), r["menu"]
    shown = r["completions_buffer"] or ""
    assert f"{KEY} " in shown and CONFERENCE_LINE in shown and BULLETIN_LINE in shown, shown
