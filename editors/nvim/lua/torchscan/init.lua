--- torchscan-lsp for Neovim 0.11+: starts the server for Python buffers, enables inlay hints and
--- code lenses, and maps a key to re-analyse.
---
---   require("torchscan").setup({ python = "/path/to/venv/bin/python", allow_execution = true })
local M = {}

local SERVER_NAME = "torchscan"
local STATUS_NOTIFICATION = "torchscan/status"
local REANALYZE = "torchscan.reanalyze"

--- Defaults of every option `setup` accepts.
M.defaults = {
  -- Interpreter that has the torchscan-lsp package; nil: $VIRTUAL_ENV's python, else python3.
  python = nil,
  -- Run the workspace's model code. Neovim has no workspace trust, so this is the opt-in.
  allow_execution = false,
  -- Files or directories that mark the workspace root, searched upwards from the buffer.
  root_markers = { "pyproject.toml", ".git" },
  -- Server settings (section `torchscan`), e.g. { device = "cuda", inlayHints = { shapes = false } }.
  settings = {},
  inlay_hints = true,
  code_lens = true,
  -- Normal-mode key that re-analyses the buffer; false for none.
  reanalyze_key = "<leader>tr",
  -- Called as on_attach(client, bufnr) after the plugin's own set-up.
  on_attach = nil,
}

M.config = vim.deepcopy(M.defaults)

--- Per-buffer analysis states from `torchscan/status`: bufnr -> { state = ..., message = ... }.
M.states = {}

local function notify(message, level)
  vim.notify("torchscan: " .. message, level or vim.log.levels.ERROR)
end

--- The interpreter that starts the server.
function M.python()
  if M.config.python then
    return vim.fn.expand(M.config.python)
  end
  local venv = vim.env.VIRTUAL_ENV
  if venv and vim.fn.executable(venv .. "/bin/python") == 1 then
    return venv .. "/bin/python"
  end
  return "python3"
end

local checked = {}

--- Checks once per interpreter that it exists and imports the package; reports the fix if not.
local function interpreter_ready(python)
  if checked[python] ~= nil then
    return checked[python]
  end
  local ok = false
  if vim.fn.executable(python) ~= 1 then
    notify(("no Python interpreter at %q. Set `python` in require('torchscan').setup{...}."):format(python))
  else
    local result = vim.system({ python, "-c", "import torchscan_lsp" }, { text = true }):wait(30000)
    if result.code == 0 then
      ok = true
    elseif (result.stderr or ""):find("No module named '?torchscan_lsp") then
      notify(("the torchscan-lsp package is not installed in %s. Install it with: %s -m pip install torchscan-lsp")
        :format(python, python))
    else
      notify(("importing torchscan_lsp with %s failed: %s"):format(python, vim.trim(result.stderr or "")))
    end
  end
  checked[python] = ok
  return ok
end

local function buffer_client(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = SERVER_NAME })[1]
end

--- Asks the server to analyse the buffer again now.
function M.reanalyze(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local client = buffer_client(bufnr)
  if not client then
    notify("the server is not running for this buffer (see :checkhealth torchscan)")
    return
  end
  client:exec_cmd({ title = "Re-analyse", command = REANALYZE, arguments = { vim.uri_from_bufnr(bufnr) } }, { bufnr = bufnr })
end

--- The analysis state of a buffer, for a statusline: "done", "running", ... or nil.
function M.status(bufnr)
  local entry = M.states[(bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr]
  return entry and entry.state
end

--- Buffers with an analysis finished since they were last entered: Neovim answers the server's
--- inlay hint refresh only for buffers shown at that moment, so these re-request hints on entry.
local hints_outdated = {}

local function on_status(_, params)
  local bufnr = vim.uri_to_bufnr(params.uri)
  M.states[bufnr] = { state = params.state, message = params.message }
  local finished = params.state ~= "running" and vim.api.nvim_buf_is_loaded(bufnr)
  -- Neovim 0.11 neither announces nor handles workspace/codeLens/refresh: refresh on news instead.
  if M.config.code_lens and finished then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end
  if finished then
    hints_outdated[bufnr] = true
  end
  vim.api.nvim_exec_autocmds("User", { pattern = "TorchscanStatus", data = { bufnr = bufnr, state = params.state } })
end

local function on_exit(code, signal)
  if code ~= 0 and signal == 0 then
    vim.schedule(function()
      notify(("the server exited with code %d. Its error is in :LspLog; check the install with :checkhealth torchscan.")
        :format(code))
    end)
  end
end

local function on_attach(client, bufnr)
  local group = vim.api.nvim_create_augroup("torchscan.buffer." .. bufnr, { clear = true })
  if M.config.inlay_hints then
    vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
    vim.api.nvim_create_autocmd("BufEnter", {
      buffer = bufnr,
      group = group,
      callback = function()
        if hints_outdated[bufnr] then
          hints_outdated[bufnr] = nil
          vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
        end
      end,
    })
  end
  if M.config.code_lens then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
    vim.api.nvim_create_autocmd({ "BufEnter", "BufWritePost", "InsertLeave" }, {
      buffer = bufnr,
      group = group,
      callback = function()
        vim.lsp.codelens.refresh({ bufnr = bufnr })
      end,
    })
  end
  if M.config.reanalyze_key then
    vim.keymap.set("n", M.config.reanalyze_key, function()
      M.reanalyze(bufnr)
    end, { buffer = bufnr, desc = "torchscan: re-analyse" })
  end
  if M.config.on_attach then
    M.config.on_attach(client, bufnr)
  end
end

--- Whether `file` is installed code (a virtual environment's or the system's packages): nobody's
--- workspace, but a file the models of a running server may have run through.
local function is_library_file(file)
  return file:find("/site-packages/", 1, true) ~= nil or file:find("/dist-packages/", 1, true) ~= nil
end

--- The vim.lsp.start configuration for a buffer, or nil when the server cannot start. An installed
--- library file joins the running server (whose results name its lines: a transformers modeling
--- file the model ran through) instead of starting one of its own, and starts none when no server runs.
function M.client_config(bufnr)
  local python = M.python()
  if not interpreter_ready(python) then
    return nil
  end
  local file = vim.api.nvim_buf_get_name(bufnr)
  local root = vim.fs.root(bufnr, M.config.root_markers) or vim.fs.dirname(file)
  if is_library_file(file) then
    local running = vim.lsp.get_clients({ name = SERVER_NAME })[1]
    if not running then
      return nil
    end
    root = running.root_dir or running.config.root_dir
  end
  local settings = vim.tbl_deep_extend("force", {}, M.config.settings, { allowExecution = M.config.allow_execution })
  return {
    name = SERVER_NAME,
    cmd = { python, "-m", "torchscan_lsp", "serve" },
    root_dir = root,
    settings = { torchscan = settings },
    handlers = { [STATUS_NOTIFICATION] = on_status },
    on_attach = on_attach,
    on_exit = on_exit,
  }
end

local function validate(opts)
  vim.validate("opts", opts, "table")
  vim.validate("python", opts.python, "string", true)
  vim.validate("allow_execution", opts.allow_execution, "boolean", true)
  vim.validate("root_markers", opts.root_markers, "table", true)
  vim.validate("settings", opts.settings, "table", true)
  vim.validate("inlay_hints", opts.inlay_hints, "boolean", true)
  vim.validate("code_lens", opts.code_lens, "boolean", true)
  vim.validate("reanalyze_key", opts.reanalyze_key, { "string", "boolean" }, true)
  vim.validate("on_attach", opts.on_attach, "function", true)
end

--- Configures the plugin and starts the server for every Python buffer (already open ones too).
function M.setup(opts)
  opts = opts or {}
  local ok, problem = pcall(validate, opts)
  if not ok then
    -- vim.validate's message starts with the file and line of this plugin: keep only the problem.
    notify(("bad option in require('torchscan').setup{...}: %s"):format(tostring(problem):gsub("^.-:%d+: ", "")))
    return
  end
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts)
  checked = {}
  local function start(bufnr)
    if vim.bo[bufnr].buftype ~= "" then
      return
    end
    local config = M.client_config(bufnr)
    if config then
      vim.lsp.start(config, { bufnr = bufnr })
    end
  end
  vim.api.nvim_create_autocmd("FileType", {
    pattern = "python",
    group = vim.api.nvim_create_augroup("torchscan", { clear = true }),
    callback = function(args)
      start(args.buf)
    end,
  })
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.bo[bufnr].filetype == "python" then
      start(bufnr)
    end
  end
  vim.api.nvim_create_user_command("TorchscanReanalyze", function()
    M.reanalyze(0)
  end, { desc = "torchscan: re-analyse the current buffer" })
end

return M
