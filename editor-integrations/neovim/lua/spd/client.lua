--- The spd_lsp client: start it, find it, talk to it.
--- Hides the 0.10 (`client.request(...)`) vs 0.11+ (`client:request(...)`) calling styles.
local M = {}

M.name = 'spd_lsp'

local methods_style = vim.fn.has('nvim-0.11') == 1

local function call(client, method, ...)
  if methods_style then
    return client[method](client, ...)
  end
  return client[method](...)
end

---@param bufnr integer?
---@return vim.lsp.Client?
function M.get(bufnr)
  return vim.lsp.get_clients({ name = M.name, bufnr = bufnr })[1]
end

---@return boolean ok, integer? request_id
function M.request(client, method, params, handler, bufnr)
  return call(client, 'request', method, params, handler, bufnr)
end

function M.cancel(client, request_id)
  call(client, 'cancel_request', request_id)
end

--- Sends a notification (didShowCompletion, didPartiallyAcceptCompletion).
function M.notify(client, method, params)
  return call(client, 'notify', method, params)
end

--- Runs a server command (spd.status, spd.indexWorkspace, spd.accept).
---@param handler fun(err: lsp.ResponseError?, result: any)?
function M.execute(client, command, arguments, handler)
  return M.request(client, 'workspace/executeCommand', { command = command, arguments = arguments or {} }, function(err, result)
    if handler then
      handler(err, result)
    end
  end)
end

local function base_config()
  local file = vim.api.nvim_get_runtime_file('lsp/' .. M.name .. '.lua', false)[1]
  return dofile(file)
end

local resolved ---@type table? the client config setup() made: base file + options
local buffers = {} ---@type table<integer, true> buffers that had a client, to reattach after a crash
local crashes = 0 ---@type integer consecutive crashes, for the back-off
local up_since = 0 ---@type integer uv.now() when the current server was started

--- Attaches a buffer holding a file (or an unnamed `:enew` buffer) to the server,
--- resolving the root with the function the config declares.
function M.start_buffer(bufnr)
  local config = resolved
  if not config or not vim.api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= '' then
    return
  end
  config.root_dir(bufnr, function(root)
    vim.schedule(function()
      if vim.api.nvim_buf_is_valid(bufnr) then
        vim.lsp.start(vim.tbl_extend('force', config, { name = M.name, root_dir = root }), { bufnr = bufnr })
      end
    end)
  end)
end

--- Back-off before the n-th restart in a row: 0.5 s, 1 s, 2 s ... at most 30 s.
function M.restart_delay_ms(n)
  return math.min(500 * 2 ^ (n - 1), 30000)
end

M.max_restarts = 8

--- The server died (not a shutdown we asked for): start it again after the back-off and
--- reattach every buffer it had; a server that ran a minute resets the count.
local function on_exit(code, signal)
  if (code == 0 and signal == 0) or vim.v.exiting ~= vim.NIL then
    return
  end
  crashes = (vim.uv.now() - up_since > 60000) and 1 or crashes + 1
  vim.schedule(function()
    if crashes > M.max_restarts then
      vim.notify(('spd: the spd-lsp server exited %d times in a row (last: code %d, signal %d); not restarting. See :checkhealth spd and %s')
        :format(crashes - 1, code, signal, vim.lsp.get_log_path()), vim.log.levels.ERROR)
      return
    end
    local delay = M.restart_delay_ms(crashes)
    vim.notify(('spd: the spd-lsp server exited (code %d, signal %d); restarting in %.1f s'):format(code, signal, delay / 1000),
      vim.log.levels.WARN)
    vim.defer_fn(function()
      for bufnr in pairs(buffers) do
        if vim.api.nvim_buf_is_loaded(bufnr) and not M.get(bufnr) then
          M.start_buffer(bufnr)
        end
      end
    end, delay)
  end)
end

--- Called on LspAttach of our client.
function M.attached(bufnr)
  buffers[bufnr] = true
end

M.missing = nil ---@type { cmd: string[], searched: string[] }? set when the server executable is not found
M.cmd = nil ---@type string[]? the server command setup() resolved

--- Starts (0.11+: configures and enables) the server for matching buffers.
--- A missing executable gives one notification naming what was searched, and no client.
---@param config table a resolved spd config
function M.start(config)
  local config_mod = require('spd.config')
  local settings = config_mod.server_settings(config)
  local cmd, searched = config_mod.server_cmd(config, vim.fn.getcwd())
  M.cmd = cmd
  if vim.fn.executable(cmd[1]) == 0 then
    M.missing = { cmd = cmd, searched = searched }
    vim.notify_once(('spd: the spd-lsp server was not found (searched: %s). Install it (pip install -e . in the spd-lsp checkout) or set `cmd` in require("spd").setup{}.')
      :format(table.concat(searched, '; ')), vim.log.levels.ERROR)
    return
  end
  M.missing = nil
  local base_root = base_config().root_dir
  local overrides = {
    cmd = cmd,
    filetypes = vim.islist(config.filetypes or {}) and config.filetypes or nil, -- a map: decided per buffer below
    -- A filetype that is off gets no client: its buffers never reach the server.
    root_dir = function(bufnr, on_dir)
      if config_mod.enabled_for(config, vim.bo[bufnr].filetype) then
        base_root(bufnr, on_dir)
      end
    end,
    init_options = settings,
    settings = { spd = settings },
    handlers = { [require('spd.state').METHOD] = require('spd.state').on_status },
    on_init = function() up_since = vim.uv.now() end,
    on_exit = on_exit,
  }
  resolved = vim.tbl_deep_extend('force', base_config(), overrides)
  local group = vim.api.nvim_create_augroup('spd.start', {})
  if vim.lsp.config then
    vim.lsp.config(M.name, overrides)
    vim.lsp.enable(M.name)
  else
    -- Neovim 0.10 has no vim.lsp.config/enable: start the client on FileType ourselves.
    vim.api.nvim_create_autocmd('FileType', { group = group, callback = function(args) M.start_buffer(args.buf) end })
    for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(bufnr) and vim.bo[bufnr].filetype ~= '' then
        M.start_buffer(bufnr)
      end
    end
  end
  -- No FileType event comes for an unnamed buffer (`:enew`): it gets a client when entered.
  vim.api.nvim_create_autocmd('BufEnter', {
    group = group,
    callback = function(args)
      if vim.api.nvim_buf_get_name(args.buf) == '' and vim.bo[args.buf].filetype == '' and not M.get(args.buf) then
        M.start_buffer(args.buf)
      end
    end,
  })
end

--- Sends changed settings to running clients (`workspace/didChangeConfiguration`).
function M.update_settings(config)
  local settings = require('spd.config').server_settings(config)
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    client.settings = { spd = settings }
    call(client, 'notify', 'workspace/didChangeConfiguration', { settings = client.settings })
  end
end

return M
