-- A headless Neovim session that plans a training run through the editors/nvim plugin and writes
-- what Neovim received as JSON:
--
--   nvim --headless --clean -l nvim_plan.lua PLUGIN_DIR PYTHON MODEL_FILE OUT_JSON
--
-- It opens MODEL_FILE, waits for its analysis and for the plan its options ask for (the target's
-- hover shows it), runs the "Plan training" code lens's command as a click would, and records the
-- $/progress reports of that plan job, the code lenses, the hover before and after, and the
-- diagnostics.
local plugin_dir, python, model_file, out = unpack(_G.arg)
local TIMEOUT = 600000

vim.opt.rtp:prepend(plugin_dir)
local messages = {}
vim.notify = function(message)
  table.insert(messages, message)
end
local result = { messages = messages, progress = {}, statuses = {} }

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
torchscan.setup({ python = python, allow_execution = true })

vim.api.nvim_create_autocmd("LspProgress", {
  callback = function(args)
    local value = args.data.params.value
    table.insert(result.progress, { kind = value.kind, title = value.title, message = value.message,
                                    percentage = value.percentage })
  end,
})
vim.api.nvim_create_autocmd("User", {
  pattern = "TorchscanStatus",
  callback = function(args)
    table.insert(result.statuses, args.data.state)
  end,
})

vim.cmd.edit(model_file)
local model = vim.api.nvim_get_current_buf()
local target_line = 0
for index, text in ipairs(vim.api.nvim_buf_get_lines(model, 0, -1, false)) do
  if text:find("^def ") then
    target_line = index - 1
  end
end

local client
local function hover()
  local answer = client:request_sync("textDocument/hover", {
    textDocument = { uri = vim.uri_from_bufnr(model) },
    position = { line = target_line, character = 4 },
  }, 10000, model)
  return answer and answer.result and answer.result.contents.value or ""
end

vim.wait(TIMEOUT, function()
  client = vim.lsp.get_clients({ bufnr = model, name = "torchscan" })[1]
  return client ~= nil and client.initialized and torchscan.status(model) == "done"
    and hover():find("Training plan**: budget", 1, true) ~= nil and not hover():find("updating", 1, true)
end, 200)
result.hover_automatic = client and hover()

vim.wait(TIMEOUT, function()
  return #vim.lsp.codelens.get(model) > 0
end, 50)
result.code_lenses = {}
local plan_lens
for _, lens in ipairs(vim.lsp.codelens.get(model)) do
  table.insert(result.code_lenses, { line = lens.range.start.line, title = lens.command and lens.command.title,
                                     command = lens.command and lens.command.command })
  if lens.command and lens.command.command == "torchscan.planTraining" then
    plan_lens = lens
  end
end

-- what a click on the lens does: run its command, and wait for the server's answer (the plan)
result.progress = {}
local answer
if plan_lens then
  client:exec_cmd(plan_lens.command, { bufnr = model }, function(err, plan)
    answer = { err = err and err.message, policies = plan and plan.policies and #plan.policies or 0 }
  end)
  vim.wait(TIMEOUT, function()
    return answer ~= nil
  end, 100)
end
result.answer = answer
result.hover_after_lens = client and hover()
result.diagnostics = vim.tbl_map(function(d)
  return { line = d.lnum, severity = d.severity, message = d.message }
end, vim.diagnostic.get(model))
finish()
