--- setup{} options: defaults, validation, and the mapping onto the server's settings contract.
local M = {}

---@class spd.Keymaps
---@field accept string|false Accept the shown draft; falls through to the key's normal meaning otherwise.
---@field accept_word string|false
---@field accept_line string|false
---@field next string|false
---@field prev string|false
---@field dismiss string|false

M.defaults = {
  -- Client side.
  cmd = nil, ---@type string[]? default: the workspace's .venv/bin/spd-lsp, else spd-lsp on PATH
  -- nil: every filetype; a list: only those; a map: `{ ['*'] = true, markdown = false }` (a filetype's own
  -- entry, else '*', else on). A filetype that is off gets no client: its buffers are never sent to the server.
  filetypes = nil, ---@type string[]|table<string, boolean>|nil
  debounce_ms = 150,
  auto_trigger = true,
  keymaps = {
    accept = '<Tab>', accept_word = '<M-Right>', accept_line = '<M-C-Right>', next = '<M-]>', prev = '<M-[>', dismiss = '<C-]>',
  },
  hl_group = 'SpdGhost',
  counter_hl_group = 'NonText',
  -- Server settings (snake_case here, camelCase on the wire); nil leaves the server's default.
  k = 3,
  max_tokens = 10,
  decoding = 'superposed', ---@type 'superposed'|'greedy'|'nucleus'|'beam'
  temperature = nil,
  model = nil,
  device = nil,
  dtype = nil,
  quantize = nil, ---@type 'none'|'int8'|'int4'|nil
  fast_path = nil, ---@type boolean|nil our own forward with a compiled decode step (the server's default: on)
  output_weights = nil, ---@type 'q8'|'int8'|'float'|nil the fast path's output projection in CPU decode steps (server default: q8)
  kernels = nil, ---@type 'auto'|string[]|nil what of the fast path's kernels to leave out (server default: 'auto')
  max_prefix_tokens = nil,
  multiline = nil, ---@type boolean|'auto'|nil drafts over several lines: never, always, or where a block starts
  multiline_max_tokens = nil, ---@type integer|nil tokens of a multi-line draft under 'auto'
  exclude = nil, ---@type string[]|nil files never completed nor read (server default: the secret-file names)
  verify = nil, ---@type 'cut'|'continue'|'off'|nil
  engine = nil, ---@type 'in-process'|'auto'|string|nil an address: unix:/path, tcp://host:port, tls://host:port
  engine_token_file = nil,
  engine_certificate = nil,
  engine_standby = nil, ---@type boolean|nil engine 'auto': a standby engine takes over if it dies (the server's default: on)
  ngrams = {}, ---@type { enabled?: boolean, orders?: integer[], weights?: table<string, number>, alpha?: number, db?: string, index?: boolean, exclude?: string[], secretFilter?: boolean }
  prompt_format = nil, ---@type 'auto'|'qwen'|'codegemma'|'starcoder'|'starcoder1'|'deepseek'|'codellama'|'codestral'|'file_sep'|'filename'|'prefix'|nil
  context = {}, ---@type { snippets?: boolean, header?: boolean, tokens?: integer, suffixTokens?: integer, sources?: string[] }
}

local CLIENT_KEYS = { 'cmd', 'filetypes', 'debounce_ms', 'auto_trigger', 'keymaps', 'hl_group', 'counter_hl_group' }
local SERVER_KEYS = {
  'k', 'max_tokens', 'decoding', 'temperature', 'model', 'device', 'dtype', 'quantize', 'fast_path', 'output_weights', 'kernels', 'max_prefix_tokens', 'multiline',
  'multiline_max_tokens', 'verify', 'engine', 'engine_token_file', 'engine_certificate', 'engine_standby', 'ngrams', 'prompt_format', 'context',
  'exclude',
}

local function camel(key)
  return (key:gsub('_(%l)', string.upper))
end

--- Merges user options over the defaults; unknown keys are an error, not a silent no-op.
---@param opts table?
function M.resolve(opts)
  opts = opts or {}
  for key in pairs(opts) do
    if not (vim.tbl_contains(CLIENT_KEYS, key) or vim.tbl_contains(SERVER_KEYS, key)) then
      error(('spd.setup: unknown option %q'):format(key))
    end
  end
  return vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
end

--- Whether completions are on for `filetype` (the `filetypes` option: nil, a list or a map with '*').
---@param config table a resolved config
---@param filetype string
function M.enabled_for(config, filetype)
  local filetypes = config.filetypes
  if filetypes == nil then
    return true
  end
  if vim.islist(filetypes) and (#filetypes > 0 or next(filetypes) == nil) then
    return vim.tbl_contains(filetypes, filetype)
  end
  local value = filetypes[filetype]
  if value == nil then
    value = filetypes['*']
  end
  if type(value) == 'function' then
    value = value()
  end
  return value == nil or value == true
end

--- The `spd` settings object the server expects, e.g. { k = 3, maxTokens = 10, ngrams = {...} }.
---@param config table a resolved config
function M.server_settings(config)
  local settings = vim.empty_dict()
  for _, key in ipairs(SERVER_KEYS) do
    local value = config[key]
    if value ~= nil and not (type(value) == 'table' and vim.tbl_isempty(value)) then
      settings[camel(key)] = value
    end
  end
  return settings
end

--- The command for a found executable: the server's log goes to its own file, since
--- Neovim records every stderr line of a server in lsp.log as an [ERROR].
---@param exe string
---@return string[]
local function default_cmd(exe)
  return { exe, '--stdio', '--log-file', vim.fs.joinpath(vim.fn.stdpath('log'), 'spd-lsp.log') }
end

--- The server command: option, else a virtual environment in `dir` or above it
--- (the usual `pip install -e .` checkout), else spd-lsp on PATH; and, for a clear
--- message when it is missing, what was searched.
---@param config table
---@param dir string
---@return string[] cmd, string[] searched
function M.server_cmd(config, dir)
  if config.cmd then
    return config.cmd, { ('cmd = %s'):format(config.cmd[1]) }
  end
  local searched = {}
  for _, venv in ipairs({ '.venv', 'venv' }) do
    local root = vim.fs.root(dir, venv)
    local exe = root and vim.fs.joinpath(root, venv, 'bin', 'spd-lsp')
    if exe and vim.fn.executable(exe) == 1 then
      return default_cmd(exe), { exe }
    end
    searched[#searched + 1] = exe or vim.fs.joinpath(dir, venv, 'bin', 'spd-lsp') .. ' (and in every parent)'
  end
  searched[#searched + 1] = 'spd-lsp on $PATH'
  return default_cmd('spd-lsp'), searched
end

return M
