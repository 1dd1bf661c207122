"""A real completion through headless Neovim (Debian's 0.7.2): start_client + buf_attach_client.

Neovim's own LSP client talks to ``citewise serve`` over stdio; the Lua script asks for
completions until the reranked list is served, applies the first item's edit the way a
completion plugin does, runs its command (the server answers with ``workspace/applyEdit``,
which Neovim applies to the .bib buffer) and writes every buffer, so the files on disk show
the whole round trip.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .test_lsp_server import DRAFT, REFS, lsp_store, pos_of  # noqa: F401  (lsp_store is a fixture)

pytestmark = [pytest.mark.slow]

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


def test_neovim_completion_round_trip(tmp_path: Path, lsp_store: Path) -> None:  # noqa: F811
    nvim = shutil.which("nvim")
    if nvim is None:
        pytest.skip("nvim not installed (apt-get install neovim); skipping the headless Neovim test")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "draft.tex").write_text(DRAFT)
    (ws / "refs.bib").write_text(REFS)
    store = tmp_path / "papers.sqlite"
    for f in lsp_store.parent.iterdir():
        (shutil.copy if f.is_file() else shutil.copytree)(f, tmp_path / f.name)
    line, char = pos_of(DRAFT, r"ad-hoc retrieval \cite{")
    out = tmp_path / "out.json"
    cmd = [sys.executable, "-m", "citewise.cli", "serve", "--store", str(store)]
    lua = (LUA.replace("OUT_PATH", json.dumps(str(out))).replace("CMD", "{" + ", ".join(json.dumps(c) for c in cmd) + "}")
           .replace("ROOT", json.dumps(str(ws))).replace("DRAFT_PATH", json.dumps(str(ws / "draft.tex")))
           .replace("LINE", str(line)).replace("CHAR", str(char)))
    script = tmp_path / "drive.lua"
    script.write_text(lua)
    proc = subprocess.run([nvim, "--headless", "--clean", "-c", f"luafile {script}"], cwd=ws,
                          capture_output=True, text=True, timeout=120)
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
