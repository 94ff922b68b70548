-- A headless Neovim session that uses the editors/nvim plugin against the real server, waits for
-- the analysis of one file and writes the hovers Neovim received on the given lines as JSON.
--
--   nvim --headless --clean -l nvim_hover.lua PLUGIN_DIR PYTHON FILE OUT_JSON LINE...
--
-- LINE: 0-based line numbers to hover (at the first non-blank character).
local plugin_dir, python, file, out = _G.arg[1], _G.arg[2], _G.arg[3], _G.arg[4]
local lines = {}
for index = 5, #_G.arg do
  table.insert(lines, tonumber(_G.arg[index]))
end
local TIMEOUT = 240000

vim.opt.rtp:prepend(plugin_dir)
local messages = {}
vim.notify = function(message)
  table.insert(messages, message)
end

local torchscan = require("torchscan")
torchscan.setup({ python = python, allow_execution = true })
vim.cmd.edit(vim.fn.fnameescape(file))
local bufnr = vim.api.nvim_get_current_buf()

local client
local settled = vim.wait(TIMEOUT, function()
  client = vim.lsp.get_clients({ bufnr = bufnr, name = "torchscan" })[1]
  local state = torchscan.status(bufnr)
  return client ~= nil and client.initialized and (state == "done" or state == "failed")
end, 100)

local result = { messages = messages, settled = settled, status = torchscan.status(bufnr), hovers = {} }
for _, line in ipairs(lines) do
  local text = vim.api.nvim_buf_get_lines(bufnr, line, line + 1, false)[1] or ""
  local answer = client and client:request_sync("textDocument/hover", {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = { line = line, character = (text:find("%S") or 1) - 1 },
  }, 20000, bufnr)
  result.hovers[tostring(line)] = answer and answer.result and answer.result.contents.value or vim.NIL
end

vim.fn.writefile({ vim.json.encode(result) }, out)
for _, running in ipairs(vim.lsp.get_clients({ name = "torchscan" })) do
  running:stop()
end
vim.wait(2000, function()
  return #vim.lsp.get_clients({ name = "torchscan" }) == 0
end)
