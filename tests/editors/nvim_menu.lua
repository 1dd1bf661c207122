-- Reads the completion menu a user sees at a \cite{} placeholder in a headless Neovim configured
-- with citewise (and, in the init file, Neovim's own completion, nvim-cmp or blink.cmp), as
-- tests/editors/test_neovim_menu.py sets it up. It opens the draft, waits for the server's complete list
-- (with two items of one key, two versions of a paper, when asked), enters Insert mode at the
-- placeholder as typed keys, opens the menu the way a user does (vim.lsp.completion.get(),
-- <C-x><C-o>, cmp.complete(), blink.cmp's show()) and records what the menu holds: for Neovim's
-- own menu the complete-items (abbr, kind, menu: what the popup draws), for the plugins the text
-- of their menu window as drawn. Everything goes to the JSON file named by the "out" parameter
-- ($CITEWISE_NVIM_PARAMS). The Insert-mode part runs from a timer: typed keys and the menu need
-- Neovim's main loop, which a script that waits in vim.wait() never gives them. Every wait is bounded.
local P = vim.fn.json_decode(table.concat(vim.fn.readfile(os.getenv("CITEWISE_NVIM_PARAMS")), "\n"))
local R = { steps = {} }
local uv = vim.uv or vim.loop

local function finish()
  vim.fn.writefile({ vim.fn.json_encode(R) }, P.out)
  vim.cmd("qa!")
end

local function fail(err)
  R.error = tostring(err)
  finish()
end

local function citewise_client(buf)
  if vim.lsp.get_clients then return vim.lsp.get_clients({ bufnr = buf, name = "citewise" })[1] end
  for _, c in pairs(vim.lsp.buf_get_clients(buf)) do -- Neovim 0.7
    if c.name == "citewise" then return c end
  end
end

-- The server's complete list at the placeholder; with P.versions, one holding two items of a key.
local function has_versions(items)
  local seen = {}
  for _, it in ipairs(items) do
    if seen[it.label] then return true end
    seen[it.label] = true
  end
  return false
end

local function complete_list(client, buf)
  local params = { textDocument = { uri = vim.uri_from_bufnr(buf) },
                   position = { line = P.placeholder[1], character = P.placeholder[2] } }
  local list
  local ok = vim.wait(P.timeout_ms, function()
    local res = vim.lsp.buf_request_sync(buf, "textDocument/completion", params, 10000)
    local r = res and res[client.id] and res[client.id].result
    if r and r.items then
      R.last_labels = {}
      for i, it in ipairs(r.items) do R.last_labels[i] = it.label end
    end
    if r and r.items and #r.items > 0 and not r.isIncomplete and (not P.versions or has_versions(r.items)) then
      list = r
      return true
    end
    return false
  end, 100)
  if not ok then error("no complete list" .. (P.versions and " with two versions of a paper" or "")) end
  return list
end

-- What the menu shows once open, or nil while it is not.
local readers = {}
function readers.builtin()
  local info = vim.fn.complete_info({ "items", "pum_visible" })
  if #info.items == 0 then return nil end
  local rows = {}
  for i, it in ipairs(info.items) do
    rows[i] = { abbr = it.abbr, kind = it.kind, menu = it.menu, word = it.word,
                line = it.abbr .. "  " .. it.kind .. "  " .. it.menu }
  end
  return rows
end

-- The lines of the plugin's menu window (its documentation window has another filetype).
local function menu_window_lines(filetype)
  local lines = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    local buf = vim.api.nvim_win_get_buf(win)
    if vim.api.nvim_win_get_config(win).relative ~= "" and vim.bo[buf].filetype == filetype then
      for _, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
        lines[#lines + 1] = { line = l }
      end
    end
  end
  return #lines > 0 and lines or nil
end

function readers.cmp()
  local cmp = require("cmp")
  if not cmp.visible() or #cmp.get_entries() == 0 then return nil end
  vim.cmd("redraw") -- nvim-cmp writes its rows when the screen is drawn
  return menu_window_lines("cmp_menu")
end

function readers.blink()
  if not require("blink.cmp").is_menu_visible() then return nil end
  return menu_window_lines("blink-cmp-menu")
end

readers.omnifunc = readers.builtin

local openers = {
  builtin = function() vim.lsp.completion.get() end,
  omnifunc = function()
    vim.bo.omnifunc = "v:lua.vim.lsp.omnifunc" -- what an 0.7 user sets; 0.8+ sets it on attach
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<C-x><C-o>", true, false, true), "n", false)
  end,
  cmp = function() require("cmp").complete() end,
  blink = function() require("blink.cmp").show() end,
}

-- Insert mode at the placeholder, the menu opened, read once it shows (and has settled).
local function menu_phase()
  local t0, opened, rows, stable = uv.hrtime(), false, nil, 0
  local timer = uv.new_timer()
  timer:start(100, 100, vim.schedule_wrap(function()
    local ok, err = pcall(function()
      if (uv.hrtime() - t0) / 1e6 > P.timeout_ms then
        error("timed out: mode " .. vim.api.nvim_get_mode().mode .. ", menu opened: " .. tostring(opened))
      end
      if vim.api.nvim_get_mode().mode:sub(1, 1) ~= "i" then return end -- "ic", "ix": a menu is up
      if not opened then
        R.steps[#R.steps + 1] = "insert mode"
        openers[P.menu]()
        opened = true
        return
      end
      local now = readers[P.menu]()
      if now == nil then return end
      stable = (rows ~= nil and vim.deep_equal(rows, now)) and stable + 1 or 0
      rows = now
      if stable < 3 then return end
      R.rows = rows
      R.cursor_line = vim.api.nvim_get_current_line()
      R.steps[#R.steps + 1] = "menu"
      timer:stop()
      finish()
    end)
    if not ok then
      timer:stop()
      fail(err)
    end
  end))
end

local ok, err = pcall(function()
  vim.o.columns, vim.o.lines = 200, 50 -- a wide terminal: what is cut is the editor's choice, not ours
  vim.cmd("edit " .. vim.fn.fnameescape(P.draft))
  local buf = vim.api.nvim_get_current_buf()
  local client
  if not vim.wait(P.timeout_ms, function()
    client = citewise_client(buf)
    return client ~= nil and client.server_capabilities ~= nil
  end, 50) then error("citewise did not attach") end
  R.steps[#R.steps + 1] = "attached"
  local list = complete_list(client, buf)
  R.items = {}
  for i, it in ipairs(list.items) do
    R.items[i] = { label = it.label, detail = it.detail, labelDetails = it.labelDetails or vim.NIL }
  end
  R.steps[#R.steps + 1] = "server list"
  vim.api.nvim_win_set_cursor(0, { P.placeholder[1] + 1, P.placeholder[2] })
  vim.api.nvim_feedkeys("i", "n", false) -- typed: Insert mode starts in the main loop
  menu_phase()
end)
if not ok then fail(err) end
