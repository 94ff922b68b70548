-- One headless Neovim session over a workspace (the example gallery, say): the editors/nvim plugin
-- against the real server opens every file of SPEC, waits for all their analyses, shows each buffer
-- until the hints of its target lines arrived, and writes what Neovim received (inlay hints,
-- diagnostics, and the hovers asked for) as JSON.
--
--   nvim --headless --clean -l nvim_gallery.lua PLUGIN_DIR PYTHON SPEC_JSON OUT_JSON
--
-- SPEC_JSON: [{"path": absolute file, "name": workspace-relative name, "targets": [0-based lines],
--              "hovers": [0-based lines whose hover to collect]}].
local plugin_dir, python, spec_path, out = unpack(_G.arg)
local TIMEOUT = 300000

vim.opt.rtp:prepend(plugin_dir)
local messages = {}
vim.notify = function(message)
  table.insert(messages, message)
end

local spec = vim.json.decode(table.concat(vim.fn.readfile(spec_path), "\n"))
local torchscan = require("torchscan")
torchscan.setup({ python = python, allow_execution = true })

local buffers = {}
for _, file in ipairs(spec) do
  vim.cmd.edit(vim.fn.fnameescape(file.path))
  buffers[file.name] = vim.api.nvim_get_current_buf()
end

local function settled(bufnr)
  local state = torchscan.status(bufnr)
  return state == "done" or state == "failed"
end

local all_settled = vim.wait(TIMEOUT, function()
  for _, bufnr in pairs(buffers) do
    if not settled(bufnr) then
      return false
    end
  end
  return true
end, 100)

local result = { messages = messages, settled = all_settled, files = {} }
for _, file in ipairs(spec) do
  local bufnr = buffers[file.name]
  -- Neovim asks for the hints of the buffers a window shows: show each in turn
  vim.cmd.buffer(bufnr)
  local function hinted()
    local lines = {}
    for _, item in ipairs(vim.lsp.inlay_hint.get({ bufnr = bufnr })) do
      lines[item.inlay_hint.position.line] = true
    end
    for _, line in ipairs(file.targets) do
      if not lines[line] then
        return false
      end
    end
    return true
  end
  vim.wait(TIMEOUT / 4, hinted, 50)
  local hints = {}
  for _, item in ipairs(vim.lsp.inlay_hint.get({ bufnr = bufnr })) do
    local label = item.inlay_hint.label
    if type(label) == "table" then
      label = table.concat(vim.tbl_map(function(part)
        return part.value
      end, label))
    end
    table.insert(hints, { line = item.inlay_hint.position.line, label = label })
  end
  local hovers = {}
  local client = vim.lsp.get_clients({ name = "torchscan", bufnr = bufnr })[1]
  for _, line in ipairs(file.hovers or {}) do
    local reply = client and client:request_sync("textDocument/hover", {
      textDocument = { uri = vim.uri_from_bufnr(bufnr) },
      position = { line = line, character = 0 },
    }, 10000, bufnr)
    hovers[tostring(line)] = reply and reply.result and reply.result.contents.value or ""
  end
  local diagnostics = vim.tbl_map(function(d)
    return { line = d.lnum, severity = d.severity, message = d.message }
  end, vim.diagnostic.get(bufnr))
  result.files[file.name] = {
    hints = hints, hovers = hovers, diagnostics = diagnostics, status = torchscan.status(bufnr),
  }
end

vim.fn.writefile({ vim.json.encode(result) }, out)
for _, client in ipairs(vim.lsp.get_clients({ name = "torchscan" })) do
  client:stop()
end
vim.wait(2000, function()
  return #vim.lsp.get_clients({ name = "torchscan" }) == 0
end)
