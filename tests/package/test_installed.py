"""What a user installs: the wheel in a virtual environment of its own, run as a user runs it.

Every ``citewise`` here is the installed console script, started from a folder outside the checkout
with no PYTHONPATH, so nothing of the checkout can stand in for a module the wheel lacks (an
editable install's finder once hid that ``citewise serve`` could not start from the wheel).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from lsprotocol import types

from ..installed import clean_env
from ..lsp_harness import EXAMPLES, build_store, start, stop

REFS = "@article{own2020,\n  title = {An Entry of My Own},\n  year = 2020\n}\n"
DENSE = "A dual encoder of questions and passages trained with in-batch negatives retrieves passages for open-domain question answering"


def run(env_dir: Path, *args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(env_dir / "bin" / "citewise"), *args],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_every_module_of_the_installed_package_imports(installed_env: Path, tmp_path: Path) -> None:
    """Import each module the installed package has, from outside the checkout. Only the optional
    Milvus engine may lack its extra."""
    probe = (
        "import importlib, pkgutil, citewise\n"
        "assert 'site-packages' in citewise.__file__, citewise.__file__\n"
        "names = [m.name for m in pkgutil.walk_packages(citewise.__path__, 'citewise.')"
        " if not m.name.endswith('__main__')]\n"
        "for name in names:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        if exc.name.split('.')[0] not in ('pymilvus', 'milvus_lite'):\n"
        "            raise\n"
        "print(len(names))\n"
    )
    proc = subprocess.run(
        [str(installed_env / "bin" / "python"), "-c", probe],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.strip()) > 80  # the CLI, server (with its handlers), indexer, models, evaluation


def test_readme_command_1_on_the_bundled_example(installed_env: Path, tmp_path: Path) -> None:
    """README set-up command (1), after the install: index the bundled library, suggest for the draft."""
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    store = "examples/store.sqlite"
    indexed = run(installed_env, "index", "examples/library.bib", "--store", store, "-q", cwd=tmp_path)
    assert indexed.returncode == 0, indexed.stderr[-2000:]
    suggested = run(installed_env, "suggest", "examples/draft.tex", "--store", store, cwd=tmp_path)
    assert suggested.returncode == 0, suggested.stderr[-2000:]
    # The draft's "navigable small world graph index" sentence and its HNSW paper, among the
    # suggestions of the installed default pipeline (BM25 + the dense list the index step embedded).
    assert "malkov2020efficient" in suggested.stdout and "Navigable Small World" in suggested.stdout
    assert (tmp_path / "examples" / "store.sqlite.dense" / "meta.json").is_file(), "embedded by default"


def test_training_is_not_installed_and_says_where_it_went(installed_env: Path, tmp_path: Path) -> None:
    proc = run(installed_env, "train", "reranker", "--data", "x", cwd=tmp_path)
    assert proc.returncode == 1
    assert "python -m training train" in proc.stderr and "Traceback" not in proc.stderr


def test_the_shipped_vscode_extension_is_found(installed_env: Path, tmp_path: Path) -> None:
    proc = run(installed_env, "vscode", "path", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    vsix = Path(proc.stdout.strip())
    assert vsix.is_file() and "site-packages" in vsix.parts and vsix.name == "citewise.vsix"


@pytest.mark.asyncio
async def test_an_lsp_session_with_the_installed_server(installed_env: Path, tmp_path: Path) -> None:
    """initialize, completion in ``\\cite{}``, a code action, and the paper's entry in the ``.bib``."""
    store = build_store(tmp_path / "store", with_jsonl=True)
    root = tmp_path / "ws"
    root.mkdir()
    (root / "refs.bib").write_text(REFS)
    command = [str(installed_env / "bin" / "citewise"), "serve"]
    lsp = await start(root, store, "visual-studio-code", command=command)
    try:
        assert lsp.init_result.server_info.name == "citewise"
        draft = f"\\documentclass{{article}}\n\\begin{{document}}\n{DENSE} \\cite{{}}.\n\\bibliography{{refs}}\n\\end{{document}}\n"
        uri = lsp.open("draft.tex", draft)
        completions = await lsp.complete_final(uri, "\\cite{")
        assert completions.items[0].label == "karpukhin2020dense"
        actions = await lsp.code_actions(uri, "\\cite{", await lsp.latest_diagnostics(uri))
        top = actions[0]
        assert top.kind == types.CodeActionKind.QuickFix and "Dense Passage Retrieval" in top.title
        lsp.apply(top.edit)
        assert "\\cite{karpukhin2020dense}" in lsp.buffers[uri]
        bib_uri = lsp.uri("refs.bib")
        assert "@inproceedings{karpukhin2020dense," in lsp.buffers[bib_uri]
        assert lsp.buffers[bib_uri].startswith(REFS)  # the user's own entry kept byte for byte
    finally:
        await stop(lsp)
