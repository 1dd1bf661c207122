r"""The packaged VS Code extension in a real VS Code (issue 17): code-server 4.100.3 on 127.0.0.1 driven by
Playwright in Debian's headless Chromium (``client-vscode/e2e/drive.js``), the ``.vsix`` installed into a
private extensions folder, ``citewise serve`` run by the extension from this virtual environment.

The store is built by the public CLI (``citewise index``) from real ACM-CR files (SIGIR 2018 and 2019,
~540 papers, with the shipped dense model's embeddings). The driver opens ``draft.tex``, types ``\cite{`` in
a sentence, waits for citewise's items (a title beside each key), accepts the first, then runs "citewise:
Suggest references for this draft" from the command palette at another sentence and picks the first paper.
The server's ``.bib`` edits stay unsaved in VS Code (as any workspace edit does); the driver saves with
"File: Save All" from the palette, as a user would, and this test reads both files from disk.

Install what it needs with ``.ci/vscode-e2e-setup``; without code-server, Chromium, Node or a packaged
``.vsix`` (``cd client-vscode && npm ci && npm run compile && npm run package``) it skips, saying which.
On failure the driver's screenshot, the code-server log and VS Code's logs (the extension's output channel
among them) stay under ``tmp_path``; their paths are in the failure message.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from citewise.server.completion.labels import BIB_MARK

from ..conftest import ACM_DL, citewise_scripts, require
from ..lsp_harness import REPO, index_with_cli
from .test_neovim import OWN_BIB

pytestmark = [pytest.mark.slow]

CLIENT = REPO / "client-vscode"
DRIVER = CLIENT / "e2e" / "drive.js"
E2E_CACHE = Path(os.environ.get("CITEWISE_E2E_CACHE", Path.home() / ".cache" / "citewise-e2e"))
DRIVER_TIMEOUT = 600  # seconds for a whole run; each wait inside is bounded by WAIT_MS
WAIT_MS = 120_000

# Line 4 asks for a citation by typing `\cite{` before its period; the command runs before line 5's period.
E2E_DRAFT = r"""\documentclass{article}
\title{Clarifying questions in conversational search}
\begin{document}
Search systems ask clarifying questions in information-seeking conversations.
Contextual neural language models such as BERT give a deeper text understanding for ad-hoc retrieval.
\bibliography{refs}
\end{document}
"""
COMPLETION_LINE, SUGGEST_LINE = 4, 5
# A second draft in the same workspace (bench/bench_vscode_first_suggestion.py opens it once the window and
# the server are up): another sentence on line 4, so no answer computed for the first draft applies.
SECOND_DRAFT = E2E_DRAFT.replace(
    "Search systems ask clarifying questions in information-seeking conversations.",
    "Users describe their intent over several turns of a conversational recommender.",
)
# The paper that sentence paraphrases (SIGIR 2019, in the store): the list must show it.
EXPECTED_TITLE = "Asking Clarifying Questions in Open-Domain Information-Seeking Conversations"


@dataclass(frozen=True)
class Tools:
    """What the driver runs: Node, code-server, the playwright-core module, Chromium, the packaged extension."""

    node: str
    code_server: Path
    playwright_core: Path
    chromium: str
    vsix: Path


def newest_vsix() -> Path | None:
    """``$CITEWISE_VSIX``, else the newest ``client-vscode/citewise-*.vsix`` (what ``npm run package`` writes)."""
    env = os.environ.get("CITEWISE_VSIX")
    if env:
        return Path(env) if Path(env).is_file() else None
    found = sorted(CLIENT.glob("citewise-*.vsix"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def find_tools() -> Tools | str:
    """The tools, or why the test cannot run (the skip message)."""
    setup = "run .ci/vscode-e2e-setup to install it"
    node = shutil.which("node")
    code_server = E2E_CACHE / "node_modules" / ".bin" / "code-server"
    playwright = E2E_CACHE / "node_modules" / "playwright-core"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    vsix = newest_vsix()
    if node is None:
        return "node is not installed (code-server 4.100.3 needs Node 20)"
    if not code_server.exists():
        return f"code-server not found at {code_server}; {setup}"
    if not playwright.is_dir():
        return f"playwright-core not found at {playwright}; {setup}"
    if chromium is None:
        return f"chromium not found on PATH; {setup}"
    if vsix is None:
        return "no packaged extension: cd client-vscode && npm ci && npm run compile && npm run package"
    return Tools(node, code_server, playwright, chromium, vsix)


def citewise_command() -> Path:
    """The ``citewise`` console script of this virtual environment: the server the extension starts."""
    script = citewise_scripts() / "citewise"
    if not script.exists():
        pytest.skip(f"no citewise console script in {script.parent} (pip install -e .)")
    return script


def build_e2e_store(folder: Path) -> Path:
    """Real ACM-CR papers (SIGIR 2018-2019) through ``citewise index``, as a user makes a store."""
    require(ACM_DL)
    files = [ACM_DL / "sigir" / f"sigir-{year}.bib" for year in (2018, 2019)]
    store, summary = index_with_cli(folder, [require(f) for f in files])
    assert summary["imported"] > 400, summary
    return store


def make_e2e_workspace(tmp: Path, store: Path) -> tuple[Path, Path]:
    """``(workspace, store)``: the draft and its own .bib, and a private copy of the store (the server
    imports the workspace's .bib into it)."""
    ws = tmp / "paper"
    ws.mkdir()
    (ws / "draft.tex").write_text(E2E_DRAFT)
    (ws / "second.tex").write_text(SECOND_DRAFT)
    (ws / "refs.bib").write_text(OWN_BIB)
    copy = tmp / "store"
    shutil.copytree(store.parent, copy)
    return ws, copy / store.name


def column_before_period(line: int, draft: str = E2E_DRAFT) -> int:
    """1-based column of the final period of ``line`` (1-based) of ``draft``: the cursor goes before it."""
    return len(draft.splitlines()[line - 1])


def driver_params(tools: Tools, ws: Path, store: Path, artifacts: Path, **extra) -> dict:
    """What ``drive.js`` reads: paths, settings, where to type, and the bounds."""
    return {
        "codeServer": str(tools.code_server),
        "chromium": tools.chromium,
        "playwrightCore": str(tools.playwright_core),
        "vsix": str(tools.vsix),
        "workspace": str(ws),
        "draft": str(ws / "draft.tex"),
        "bib": str(ws / "refs.bib"),
        "settings": {"citewise.server.command": str(citewise_command()), "citewise.store": str(store)},
        "completionAt": {"line": COMPLETION_LINE, "column": column_before_period(COMPLETION_LINE)},
        "typed": " \\cite{",
        "suggestAt": {"line": SUGGEST_LINE, "column": column_before_period(SUGGEST_LINE)},
        "artifacts": str(artifacts),
        "mode": "full",
        "timeoutMs": WAIT_MS,
        **extra,
    }


def kill_groups(driver: subprocess.Popen, artifacts: Path) -> None:
    """Kill the driver's process group and those it recorded (code-server, the browser): a driver killed
    by the timeout cannot clean up after itself."""
    groups = [driver.pid]
    pids = artifacts / "pids.json"
    if pids.exists():
        recorded = json.loads(pids.read_text())
        groups += [recorded.get("codeServer"), *recorded.get("browser", [])]
    for pgid in filter(None, groups):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_driver(tools: Tools, params: dict, artifacts: Path) -> dict:
    """Run ``drive.js`` on ``params``; its JSON result (with ``error`` when a step failed)."""
    artifacts.mkdir(parents=True, exist_ok=True)
    params_file = artifacts / "params.json"
    params_file.write_text(json.dumps(params))
    driver = subprocess.Popen(
        [tools.node, str(DRIVER), str(params_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = driver.communicate(timeout=DRIVER_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_groups(driver, artifacts)
        stdout, stderr = driver.communicate()
        stdout = json.dumps({"error": f"driver killed after {DRIVER_TIMEOUT} s"})
    finally:
        kill_groups(driver, artifacts)
    lines = stdout.strip().splitlines()
    result = (
        json.loads(lines[-1]) if lines else {"error": f"driver printed nothing (exit {driver.returncode})"}
    )
    result["stderr"] = stderr[-4000:]
    return result


def failure_report(result: dict, artifacts: Path) -> str:
    """What to look at when the run failed: the error, the driver's log, the artifacts' paths."""
    return (
        f"{result.get('error')}\n--- driver log ---\n{result.get('stderr')}\n"
        f"screenshot: {result.get('failureScreenshot')}\ncode-server log: {artifacts / 'code-server.log'}\n"
        f"VS Code logs (the extension's output channel among them): {result.get('vscodeLogs')}"
    )


def entries_of(bib: str, key: str) -> int:
    return len(re.findall(r"@\w+\{" + re.escape(key) + ",", bib))


def entry_shows(bib: str, key: str, title: str) -> bool:
    """Whether ``key``'s entry in ``bib`` has the title shown in VS Code (its first 30 characters, as the
    list cuts long titles; case, braces and line breaks aside)."""
    entry = bib[bib.index("{" + key + ",") :][:800]
    flat = " ".join(entry.replace("{", "").replace("}", "").split()).lower()
    return title.rstrip("…").strip()[:30].lower() in flat


def shown_title(description: str) -> str:
    """The title in a completion row's description, the menu line of server/completion/labels.py:
    "[✓ in .bib · ]Title (Author et al. 2019, Venue)" (the last parenthesis is authors, year, venue)."""
    title = description.removeprefix(BIB_MARK)
    return title.rsplit(" (", 1)[0] if title.endswith(")") else title


@pytest.fixture(scope="module")
def tools() -> Tools:
    found = find_tools()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="module")
def e2e_store(tools: Tools, tmp_path_factory) -> Path:  # tools first: skip before building anything
    return build_e2e_store(tmp_path_factory.mktemp("vscode-store"))


def test_vscode_completion_and_suggest_for_draft(tmp_path: Path, tools: Tools, e2e_store: Path) -> None:
    ws, store = make_e2e_workspace(tmp_path, e2e_store)
    artifacts = tmp_path / "artifacts"
    shots = {"completion": str(tmp_path / "completion.png"), "suggest": str(tmp_path / "suggest.png")}
    r = run_driver(tools, driver_params(tools, ws, store, artifacts, screenshots=shots), artifacts)
    assert "error" not in r, failure_report(r, artifacts)
    print(json.dumps({"first_suggestion_ms": r["completion"]["firstSuggestionMs"], "shots": shots}))
    draft, bib = (ws / "draft.tex").read_text(), (ws / "refs.bib").read_text()
    lines = draft.splitlines()
    assert bib.startswith(OWN_BIB), bib[:500]

    # Completion: papers (titles beside the keys), the paraphrased one among them; the first accepted.
    comp = r["completion"]
    titles = [row["description"] for row in comp["rows"]]
    assert len(titles) >= 3 and all(titles), comp["rows"]
    assert any(t.startswith(EXPECTED_TITLE[:40]) for t in titles), titles
    key = comp["accepted"]["label"]
    assert lines[COMPLETION_LINE - 1].endswith(" \\cite{" + key + "}."), lines[COMPLETION_LINE - 1]
    assert entries_of(bib, key) == 1, bib[len(OWN_BIB) :]
    assert entry_shows(bib, key, shown_title(comp["accepted"]["description"])), (
        comp["accepted"],
        bib[len(OWN_BIB) :],
    )

    # Suggest references for this draft: a quick pick of papers; the first one cited at the cursor.
    sug = r["suggest"]
    assert len(sug["rows"]) >= 3 and all(row["label"] for row in sug["rows"]), sug["rows"]
    k2 = sug["key"]
    assert k2, sug["chosen"]
    assert lines[SUGGEST_LINE - 1].endswith("\\cite{" + k2 + "}."), lines[SUGGEST_LINE - 1]
    assert entries_of(bib, k2) == 1, bib[len(OWN_BIB) :]
    assert entry_shows(bib, k2, sug["chosen"]["label"]), (sug["chosen"], bib[len(OWN_BIB) :])
    assert draft.count("\\cite{") == 2
