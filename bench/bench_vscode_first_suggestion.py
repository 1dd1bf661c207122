r"""Time from opening a draft in VS Code to citewise's first suggestion being visible.

Each run is a fresh VS Code (code-server 4.100.3 in headless Chromium, the packaged extension installed
into a new profile, so a new ``citewise serve``): Quick Open ``draft.tex``, Go to Line, type `` \cite{``,
and wait until the suggest widget shows citewise's items (a title beside a key); until then the driver
closes the widget and asks again (Ctrl+Space) every 300 ms, as a user would. The figure covers what a user
waits through: the editor opening, the server starting (the extension activates when the workspace holds a
``.bib``, so it may start before the draft opens), loading the store, ranking. Also reported: the editor
alone (Quick Open to a focused editor), and, when the status bar said it first, when the server was ready.
Then, in the same window, a second draft (``second.tex``, another sentence) is opened the same way: the
figure for a draft opened while VS Code and the server are already running.

    python bench/bench_vscode_first_suggestion.py [--runs 5] [--docs]

``--docs`` also makes one full run (completion accepted, "Suggest references for this draft") that saves
``docs/vscode-completion.png`` and ``docs/vscode-suggest.png``. Needs ``.ci/vscode-e2e-setup`` and a
packaged ``.vsix`` (``$CITEWISE_VSIX`` or ``client-vscode/citewise-*.vsix``). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, machine  # noqa: E402

from tests.editors.test_vscode_e2e import (  # noqa: E402
    COMPLETION_LINE,
    SECOND_DRAFT,
    build_e2e_store,
    column_before_period,
    driver_params,
    find_tools,
    make_e2e_workspace,
    run_driver,
)


def one_run(tools, base_store: Path, folder: Path, **extra) -> dict:
    """One fresh VS Code on a fresh workspace and store copy; the driver's result (raises on failure)."""
    folder.mkdir(parents=True)
    ws, store = make_e2e_workspace(folder, base_store)
    artifacts = folder / "artifacts"
    result = run_driver(tools, driver_params(tools, ws, store, artifacts, **extra), artifacts)
    if "error" in result:
        raise SystemExit(f"run failed: {result['error']}\n{result.get('stderr')}\nartifacts: {artifacts}")
    return result


def stats(values: list[float]) -> dict:
    return {
        "median_ms": round(statistics.median(values)),
        "min_ms": round(min(values)),
        "max_ms": round(max(values)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--docs", action="store_true", help="also save the README's screenshots into docs/")
    args = ap.parse_args()
    tools = find_tools()
    if isinstance(tools, str):
        raise SystemExit(tools)
    tmp = Path(tempfile.mkdtemp(prefix="bench-vscode-"))
    try:
        base = build_e2e_store(tmp / "base")
        before = machine()
        second = {"line": COMPLETION_LINE, "column": column_before_period(COMPLETION_LINE, SECOND_DRAFT)}
        extra = {"mode": "first-suggestion", "secondDraft": "second.tex", "secondAt": second}
        runs = [one_run(tools, base, tmp / f"run{i}", **extra) for i in range(args.runs)]
        after = machine()
        if args.docs:
            shots = {"completion": str(REPO / "docs" / "vscode-completion.png")}
            shots["suggest"] = str(REPO / "docs" / "vscode-suggest.png")
            one_run(tools, base, tmp / "docs", screenshots=shots, showDetails=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    first = [r["completion"]["firstSuggestionMs"] for r in runs]
    ready = [r["completion"]["serverReadyMs"] for r in runs if r["completion"]["serverReadyMs"] is not None]
    report = {
        "what": "VS Code (code-server 4.100.3): Quick Open draft.tex -> citewise's first completion items visible",
        "runs": args.runs,
        "first_suggestion": stats(first),
        "editor_open": stats([r["editorMs"] for r in runs]),
        "second_draft_first_suggestion": stats([r["secondDraft"]["firstSuggestionMs"] for r in runs]),
        "second_draft_editor_open": stats([r["secondDraft"]["editorMs"] for r in runs]),
        "server_ready_in_status_bar": stats(ready) if ready else None,
        "asked_again": [r["completion"]["retriggers"] for r in runs],
        "first_suggestion_ms_each": first,
        "vsix": str(tools.vsix),
        "machine_before": before,
        "machine_after": after,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
