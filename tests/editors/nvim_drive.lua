-- Drives a headless Neovim configured with a citewise configuration from docs/editors.md
-- (loaded as the init file) the way a user works: open the draft, ask for completion at a
-- \cite{} placeholder, take the "Cite: Title (Year)" code action through Neovim's own code-action
-- UI (vim.ui.select answered by this script), then accept the same paper again at once: its code
-- action at the second placeholder, its completion item at the third, as a completion plugin does
-- (the item's textEdit, then its command, if any, with workspace/executeCommand). The .bib buffer is never saved. Everything it
-- sees goes to the JSON file named by $CITEWISE_NVIM_OUT; the Python test (tests/editors/test_neovim.py)
-- asserts on it. Written for Neovim 0.7 to 0.12; every wait is bounded.
local P = vim.fn.json_decode(table.concat(vim.fn.readfile(os.getenv("CITEWISE_NVIM_PARAMS")), "\n"))
local R = { steps = {} }
local uv = vim.uv or vim.loop
local t_start = uv.hrtime()

local function finish()
  R.seconds = (uv.hrtime() - t_start) / 1e9
  vim.fn.writefile({ vim.fn.json_encode(R) }, P.out)
  vim.cmd("qa!")
end

local function step(name) R.steps[#R.steps + 1] = name end

local function wait(ms, cond, what)
  if not vim.wait(ms, cond, 50) then error("timed out after " .. ms .. " ms waiting for " .. what) end
end

local function citewise_client(buf)
  if vim.lsp.get_clients then
    return vim.lsp.get_clients({ bufnr = buf, name = "citewise" })[1]
  end
  for _, c in pairs(vim.lsp.buf_get_clients(buf)) do
    if c.name == "citewise" then return c end
  end
end

local function result_of(res, client)
  local r = res and res[client.id]
  if r and r.error then R.steps[#R.steps + 1] = "error: " .. vim.inspect(r.error) end
  return r and r.result
end

local function pos_params(buf, line, char)
  return { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = line, character = char } }
end

-- The complete (reranked) completion list at a position; ok(list) may ask for more.
local function complete(client, buf, line, char, ok)
  local list
  wait(P.timeout_ms, function()
    local r = result_of(vim.lsp.buf_request_sync(buf, "textDocument/completion", pos_params(buf, line, char), 10000), client)
    if r and r.items and #r.items > 0 and not r.isIncomplete and (ok == nil or ok(r)) then
      list = r
      return true
    end
    return false
  end, "the complete completion list at " .. line .. ":" .. char)
  return list
end

local function code_actions(client, buf, line, char)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = { start = { line = line, character = char }, ["end"] = { line = line, character = char } },
    context = { diagnostics = {} },
  }
  local actions
  wait(P.timeout_ms, function()
    local r = result_of(vim.lsp.buf_request_sync(buf, "textDocument/codeAction", params, 10000), client)
    if r and #r > 0 then actions = r; return true end
    return false
  end, "code actions at " .. line .. ":" .. char)
  return actions
end

local function touches(edit, uri)
  for _, c in ipairs(edit and edit.documentChanges or {}) do
    if (c.textDocument and c.textDocument.uri == uri) or c.uri == uri then return true end
  end
  return edit ~= nil and edit.changes ~= nil and edit.changes[uri] ~= nil
end

local function buf_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n"
end

local ok, err = pcall(function()
  R.version = tostring(vim.version().major) .. "." .. vim.version().minor .. "." .. vim.version().patch
  vim.cmd("edit " .. vim.fn.fnameescape(P.draft))
  local buf = vim.api.nvim_get_current_buf()
  R.filetype = vim.bo[buf].filetype
  local client
  wait(P.timeout_ms, function()
    client = citewise_client(buf)
    return client ~= nil and client.server_capabilities ~= nil and client.server_capabilities.completionProvider ~= nil
  end, "the citewise client to attach and initialize")
  R.root_dir = client.config.root_dir
  R.cmd = client.config.cmd
  step("attached")

  -- 1. Completion at the first placeholder.
  local ph1, ph2, ph3 = P.placeholders[1], P.placeholders[2], P.placeholders[3]
  local list = complete(client, buf, ph1[1], ph1[2])
  R.labels = {}
  for i, item in ipairs(list.items) do R.labels[i] = item.label end
  R.first_item = { label = list.items[1].label, detail = list.items[1].detail,
                   description = list.items[1].labelDetails and list.items[1].labelDetails.description }
  step("completion")

  -- Take the code action titled `title` at placeholder `ph` through Neovim's code-action UI
  -- (vim.lsp.buf.code_action asks vim.ui.select, answered here); the draft line once it cites.
  local function take_action(ph, title)
    local titles = {}
    vim.ui.select = function(items, _, on_choice)
      local pick
      for i, item in ipairs(items) do
        local a = item.action or item[2] -- 0.10+: { action =, ctx = }; 0.7: { client_id, action }
        titles[i] = a.title
        if a.title == title and pick == nil then pick = i end
      end
      if pick then on_choice(items[pick], pick) else on_choice(nil, nil) end
    end
    vim.api.nvim_win_set_cursor(0, { ph[1] + 1, ph[2] })
    vim.lsp.buf.code_action()
    local line
    wait(P.timeout_ms, function()
      line = vim.api.nvim_buf_get_lines(buf, ph[1], ph[1] + 1, false)[1]
      return line:match("\\cite{([^}]+)}") ~= nil
    end, "a key in the draft at line " .. ph[1])
    return line, titles
  end

  -- 2. The "Cite: ..." code action at the first placeholder.
  local actions = code_actions(client, buf, ph1[1], ph1[2])
  R.action_titles = {}
  for i, a in ipairs(actions) do R.action_titles[i] = a.title end
  local chosen
  for _, a in ipairs(actions) do
    if a.title:find("^Cite: ") then chosen = a; break end
  end
  if not chosen then error("no 'Cite:' code action") end
  R.chosen = { title = chosen.title, has_edit = chosen.edit ~= nil,
               command = chosen.command and chosen.command.command }
  R.line1, R.ui_titles = take_action(ph1, chosen.title)
  R.key = R.line1:match("\\cite{([^}]+)}")
  local bib = vim.fn.bufnr(P.bib)
  local entry = "{" .. R.key .. ","
  wait(P.timeout_ms, function()
    bib = vim.fn.bufnr(P.bib)
    return bib > 0 and vim.api.nvim_buf_is_loaded(bib) and buf_text(bib):find(entry, 1, true) ~= nil
  end, "the entry in the .bib buffer")
  R.bib_after_action = buf_text(bib)
  R.bib_modified = vim.bo[bib].modified
  R.bib_filetype = vim.bo[bib].filetype
  R.bib_attached = vim.lsp.buf_is_attached(bib, client.id)
  step("code action")

  -- 3. The same paper again at once, the .bib unsaved: its code action at the second
  -- placeholder (must not touch the .bib), then its completion item at the third (must not be
  -- offered as a new entry; accepted as a completion plugin does: textEdit, then command).
  local bib_uri = vim.uri_from_bufnr(bib)
  R.second_action = vim.NIL
  for _, a in ipairs(code_actions(client, buf, ph2[1], ph2[2])) do
    if a.title == chosen.title then
      R.second_action = { touches_bib = touches(a.edit, bib_uri), command = a.command and a.command.command or vim.NIL }
    end
  end
  if R.second_action ~= vim.NIL then R.line2 = take_action(ph2, chosen.title) end
  R.bib_after_second_action = buf_text(bib)
  step("second code action")
  local item
  complete(client, buf, ph3[1], ph3[2], function(l)
    for _, it in ipairs(l.items) do
      if it.label == R.key then item = it; return true end
    end
    return false
  end)
  R.third_item = { label = item.label, command = item.command and item.command.command or vim.NIL }
  vim.lsp.util.apply_text_edits({ item.textEdit }, buf, client.offset_encoding or "utf-16")
  if item.command then
    result_of(vim.lsp.buf_request_sync(buf, "workspace/executeCommand", item.command, 20000), client)
  end
  R.line3 = vim.api.nvim_buf_get_lines(buf, ph3[1], ph3[1] + 1, false)[1]
  step("completion accepted")

  -- 4. Diagnostics as published so far (recorded for the report, not asserted: they are debounced).
  R.diagnostics = {}
  for i, d in ipairs(vim.diagnostic.get(buf)) do R.diagnostics[i] = { message = d.message, severity = d.severity } end
  R.bib_final = buf_text(bib)
  R.bib_modified_final = vim.bo[bib].modified
  R.draft_final = buf_text(buf)
  step("done")
end)
if not ok then R.error = tostring(err) end
finish()
