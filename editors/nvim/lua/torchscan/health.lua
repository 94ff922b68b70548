--- :checkhealth torchscan: the interpreter, the server package and torch.
local M = {}

function M.check()
  local torchscan = require("torchscan")
  local python = torchscan.python()
  vim.health.start("torchscan")
  if vim.fn.has("nvim-0.11") ~= 1 then
    vim.health.error("Neovim 0.11 or newer is needed")
  end
  if vim.fn.executable(python) ~= 1 then
    vim.health.error(("no interpreter at %q"):format(python), { "Set `python` in require('torchscan').setup{...}" })
    return
  end
  vim.health.ok("interpreter: " .. python)
  for _, module in ipairs({ "torchscan_lsp", "torch" }) do
    local result = vim.system({ python, "-c", "import " .. module }, { text = true }):wait(60000)
    if result.code == 0 then
      vim.health.ok(module .. " imports")
    else
      local package = module == "torchscan_lsp" and "torchscan-lsp" or "torch"
      vim.health.error(module .. " does not import", { ("%s -m pip install %s"):format(python, package) })
    end
  end
  if not torchscan.config.allow_execution then
    vim.health.warn("allow_execution is false: the server does not run model code, so it shows no costs",
      { "require('torchscan').setup({ allow_execution = true }) for workspaces you trust" })
  end
end

return M
