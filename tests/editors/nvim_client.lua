-- A headless Neovim session that uses the editors/nvim plugin against the real server and writes
-- what Neovim received (inlay hints, code lenses, hover, diagnostics, messages) as JSON.
--
--   nvim --headless --clean -l nvim_client.lua PLUGIN_DIR PYTHON MODELS_DIR OUT_JSON MODE
--
-- MODE "session": open model.py and broken.py, wait for their analyses, collect everything.
-- MODE "setup-only": run setup and open model.py, collect the messages (for bad interpreters).
-- MODE "exit-at-start": like setup-only, but wait for the message about the server's exit.
-- MODE "bad-option": call setup with a wrongly typed option and collect the message.
-- MODE "config": write the vim.lsp.start configuration the plugin builds, without starting it.
-- MODE "untrusted": allow_execution off; open model.py and collect its diagnostics.
local plugin_dir, python, models, out, mode = unpack(_G.arg)
local TIMEOUT = 120000

vim.opt.rtp:prepend(plugin_dir)
local messages = {}
vim.notify = function(message)
  table.insert(messages, message)
end

local result = { messages = messages, statuses = {} }
local function finish()
  vim.fn.writefile({ vim.json.encode(result) }, out)
  for _, client in ipairs(vim.lsp.get_clients({ name = "torchscan" })) do
    client:stop()
  end
  vim.wait(2000, function()
    return #vim.lsp.get_clients({ name = "torchscan" }) == 0
  end)
end

local torchscan = require("torchscan")
torchscan.setup({
  python = python,
  allow_execution = (mode == "bad-option" and "yes") or mode ~= "untrusted",
  reanalyze_key = "<leader>tr",
  settings = mode == "config" and { device = "cuda:1", inlayHints = { shapes = false } } or nil,
})

if mode == "config" then
  vim.cmd("noautocmd edit " .. vim.fn.fnameescape(models .. "/model.py"))
  local config = torchscan.client_config(vim.api.nvim_get_current_buf())
  result.config = { cmd = config.cmd, root_dir = config.root_dir, settings = config.settings, name = config.name }
  -- an installed library file: no server of its own; with one running (stubbed), that one's root
  vim.cmd("noautocmd edit " .. vim.fn.fnameescape(models .. "/venv/lib/python3.12/site-packages/lib/modeling.py"))
  local library = vim.api.nvim_get_current_buf()
  result.library_alone = torchscan.client_config(library) == nil
  local get_clients = vim.lsp.get_clients
  vim.lsp.get_clients = function(filter)
    return filter.name == "torchscan" and { { name = "torchscan", root_dir = "/running/ws", config = {} } } or {}
  end
  result.library_root = torchscan.client_config(library).root_dir
  vim.lsp.get_clients = get_clients
  finish()
  return
end

vim.api.nvim_create_autocmd("User", {
  pattern = "TorchscanStatus",
  callback = function(args)
    local name = vim.fs.basename(vim.api.nvim_buf_get_name(args.data.bufnr))
    result.statuses[name] = result.statuses[name] or {}
    table.insert(result.statuses[name], args.data.state)
  end,
})

vim.cmd.edit(models .. "/model.py")
local model = vim.api.nvim_get_current_buf()
if mode == "untrusted" then
  vim.wait(TIMEOUT, function()
    return #vim.diagnostic.get(model) > 0
  end, 50)
  result.diagnostics = vim.tbl_map(function(d)
    return { line = d.lnum, severity = d.severity, message = d.message }
  end, vim.diagnostic.get(model))
  finish()
  return
end
if mode ~= "session" then
  if mode == "exit-at-start" then
    vim.wait(20000, function()
      return #messages > 0
    end, 50)
  end
  result.clients = #vim.lsp.get_clients({ name = "torchscan" })
  finish()
  return
end

local function settled(bufnr)
  local state = torchscan.status(bufnr)
  return state == "done" or state == "failed"
end

local client
vim.wait(TIMEOUT, function()
  client = vim.lsp.get_clients({ bufnr = model, name = "torchscan" })[1]
  return client ~= nil and client.initialized and settled(model)
end, 50)
result.root_dir = client and client.root_dir
vim.cmd.edit(models .. "/broken.py")
local broken = vim.api.nvim_get_current_buf()
vim.wait(TIMEOUT, function()
  return settled(broken) and #vim.diagnostic.get(broken) > 0
end, 50)
vim.cmd.buffer(model)

-- Inlay hints are fetched for the visible window after the server's refresh; code lenses after
-- the plugin's refresh on the status notification.
vim.wait(TIMEOUT, function()
  return #vim.lsp.inlay_hint.get({ bufnr = model }) >= 2 and #vim.lsp.codelens.get(model) > 0
end, 50)

result.inlay_hints = {}
for _, item in ipairs(vim.lsp.inlay_hint.get({ bufnr = model })) do
  local label = item.inlay_hint.label
  if type(label) == "table" then
    label = table.concat(vim.tbl_map(function(part)
      return part.value
    end, label))
  end
  table.insert(result.inlay_hints, { line = item.inlay_hint.position.line, label = label })
end

result.code_lenses = {}
for _, lens in ipairs(vim.lsp.codelens.get(model)) do
  table.insert(result.code_lenses, {
    line = lens.range.start.line,
    title = lens.command and lens.command.title,
    command = lens.command and lens.command.command,
  })
end

-- Hover where the module is built: the first line that calls nn.Conv2d.
local hover_line = 0
for index, text in ipairs(vim.api.nvim_buf_get_lines(model, 0, -1, false)) do
  if text:find("nn.Conv2d(", 1, true) then
    hover_line = index - 1
    break
  end
end
local hover = client:request_sync("textDocument/hover", {
  textDocument = { uri = vim.uri_from_bufnr(model) },
  position = { line = hover_line, character = 14 },
}, 10000, model)
result.hover = hover and hover.result and hover.result.contents.value

result.diagnostics = {}
for name, bufnr in pairs({ ["model.py"] = model, ["broken.py"] = broken }) do
  result.diagnostics[name] = vim.tbl_map(function(d)
    return { line = d.lnum, severity = d.severity, message = d.message }
  end, vim.diagnostic.get(bufnr))
end

-- The plugin's key re-analyses: a new "running" then a final state must follow.
local mapping = vim.fn.maparg(vim.g.mapleader and "<leader>tr" or "\\tr", "n", false, true)
result.reanalyze_mapped = mapping.callback ~= nil
local before = #(result.statuses["model.py"] or {})
if mapping.callback then
  mapping.callback()
  vim.wait(TIMEOUT, function()
    local seen = result.statuses["model.py"] or {}
    return #seen > before + 1 and settled(model)
  end, 50)
end
result.statuses_after_reanalyze = vim.list_slice(result.statuses["model.py"] or {}, before + 1)

finish()
