-- A headless Neovim session on a git workspace: the editors/nvim plugin against the real server, a
-- user's edits saved one after the other, and what Neovim received after each (inlay hints, the
-- target's hover, code lenses) written as JSON.
--
--   nvim --headless --clean -l nvim_deltas.lua PLUGIN_DIR PYTHON WORKSPACE OUT_JSON STEPS_JSON
--
-- STEPS_JSON: [{"name", "file" (below WORKSPACE), "text" (the whole buffer to save), "target"
-- (0-based line of the target to hover), "until" (a Lua pattern the hover must match: the step
-- waits for it, so that a baseline still being analysed is waited for)}].
local plugin_dir, python, workspace, out, steps_file = unpack(_G.arg)
local TIMEOUT = 180000

vim.opt.rtp:prepend(plugin_dir)
local messages = {}
vim.notify = function(message)
  table.insert(messages, message)
end
local result = { messages = messages, steps = {} }

local torchscan = require("torchscan")
torchscan.setup({ python = python, allow_execution = true })

local function finish()
  vim.fn.writefile({ vim.json.encode(result) }, out)
  for _, client in ipairs(vim.lsp.get_clients({ name = "torchscan" })) do
    client:stop()
  end
  vim.wait(2000, function()
    return #vim.lsp.get_clients({ name = "torchscan" }) == 0
  end)
end

-- {0-based line: label} of a list of InlayHint objects
local function by_line(inlay_hints)
  local found = {}
  for _, hint in ipairs(inlay_hints) do
    local label = hint.label
    if type(label) == "table" then
      label = table.concat(vim.tbl_map(function(part)
        return part.value
      end, label))
    end
    found[tostring(hint.position.line)] = label
  end
  return found
end

-- the hints Neovim holds for the buffer (what it shows)
local function hints(bufnr)
  return by_line(vim.tbl_map(function(item)
    return item.inlay_hint
  end, vim.lsp.inlay_hint.get({ bufnr = bufnr })))
end

-- the hints the server gives for the whole buffer now
local function server_hints(client, bufnr)
  local answer = client:request_sync("textDocument/inlayHint", {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    range = { start = { line = 0, character = 0 }, ["end"] = { line = vim.api.nvim_buf_line_count(bufnr), character = 0 } },
  }, 10000, bufnr)
  return by_line(answer and answer.result or {})
end

local function hover(client, bufnr, line)
  local answer = client:request_sync("textDocument/hover", {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = { line = line, character = 4 },
  }, 10000, bufnr)
  return answer and answer.result and answer.result.contents.value or ""
end

local function lenses(bufnr)
  return vim.tbl_map(function(lens)
    return lens.command and lens.command.title
  end, vim.lsp.codelens.get(bufnr))
end

local ok, failure = pcall(function()
  local steps = vim.json.decode(table.concat(vim.fn.readfile(steps_file), "\n"))
  for _, step in ipairs(steps) do
    vim.cmd.edit(workspace .. "/" .. step.file)
    local bufnr = vim.api.nvim_get_current_buf()
    local client
    vim.wait(TIMEOUT, function()
      client = vim.lsp.get_clients({ bufnr = bufnr, name = "torchscan" })[1]
      return client ~= nil and client.initialized
    end, 50)
    if step.text ~= nil and step.text ~= vim.NIL then
      vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, vim.split(step.text, "\n", { plain = true, trimempty = true }))
      vim.cmd.write()
    end
    local seen = { name = step.name }
    local started = vim.uv.hrtime()
    vim.wait(TIMEOUT, function()
      local state = torchscan.status(bufnr)
      if state ~= "done" then
        return false
      end
      seen.hover = hover(client, bufnr, step.target)
      return seen.hover:find(step["until"]) ~= nil
    end, 100)
    -- the hints of the final result: the server asked Neovim to refresh them; ask once more and wait
    -- until Neovim holds what the server now answers
    vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
    vim.wait(3000, function()
      return vim.deep_equal(hints(bufnr), server_hints(client, bufnr))
    end, 100)
    seen.hints = hints(bufnr)
    seen.lenses = lenses(bufnr)
    seen.state = torchscan.status(bufnr)
    seen.seconds = (vim.uv.hrtime() - started) / 1e9
    table.insert(result.steps, seen)
  end
end)
if not ok then
  result.error = tostring(failure)
end
finish()
