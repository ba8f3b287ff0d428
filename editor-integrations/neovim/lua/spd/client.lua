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

--- Neovim 0.10 has no vim.lsp.config/enable: start the client on FileType ourselves,
--- resolving the root with the same function the config file declares.
local function start_legacy(config)
  local group = vim.api.nvim_create_augroup('spd.start', {})
  local function start(bufnr)
    if vim.bo[bufnr].buftype ~= '' or (config.filetypes and not vim.tbl_contains(config.filetypes, vim.bo[bufnr].filetype)) then
      return
    end
    config.root_dir(bufnr, function(root)
      vim.lsp.start(vim.tbl_extend('force', config, { name = M.name, root_dir = root }), { bufnr = bufnr })
    end)
  end
  vim.api.nvim_create_autocmd('FileType', { group = group, callback = function(args) start(args.buf) end })
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.bo[bufnr].filetype ~= '' then
      start(bufnr)
    end
  end
end

--- Starts (0.11+: configures and enables) the server for matching buffers.
---@param config table a resolved spd config
function M.start(config)
  local settings = require('spd.config').server_settings(config)
  local overrides = {
    cmd = require('spd.config').server_cmd(config, vim.fn.getcwd()),
    filetypes = config.filetypes,
    init_options = settings,
    settings = { spd = settings },
  }
  if vim.lsp.config then
    vim.lsp.config(M.name, overrides)
    vim.lsp.enable(M.name)
  else
    start_legacy(vim.tbl_deep_extend('force', base_config(), overrides))
  end
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
