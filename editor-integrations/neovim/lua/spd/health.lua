--- :checkhealth spd: the server command, its version, the model, device and stores.
local client_mod = require('spd.client')

local M = {}

local health = vim.health

--- `spd.status` of the running client, or nil and why not.
local function server_status(client)
  local response, err = client:request_sync('workspace/executeCommand', { command = 'spd.status', arguments = {} }, 5000)
  if not response then
    return nil, err or 'no answer'
  end
  if response.err then
    return nil, response.err.message
  end
  return response.result
end

local function report_status(status)
  local model = status.model
  if type(model) == 'table' then
    health.ok(('model: %s on %s (%s)'):format(model.name or '?', model.device or '?', model.dtype or 'default dtype'))
  elseif status.error and status.error ~= vim.NIL then
    health.error('model: failed to load: ' .. tostring(status.error))
  else
    health.info('model: not loaded yet (it loads on the first completion)')
  end
  local stores = type(status.stores) == 'table' and status.stores or {}
  if #stores == 0 then
    health.info('n-gram stores: none (no workspace folder, or n-grams disabled)')
  end
  for _, store in ipairs(stores) do
    health.ok(('n-gram store for %s: %s files, %s tokens%s (%s)'):format(store.root, store.files or '?', store.tokens or '?',
      store.indexing and ', indexing' or '', store.path or 'default location'))
  end
end

function M.check()
  health.start('spd-lsp server')
  if client_mod.missing then
    health.error(('server executable not found; searched: %s'):format(table.concat(client_mod.missing.searched, '; ')),
      { 'Install spd-lsp (pip install -e . in its checkout)', 'or set `cmd` in require("spd").setup{}' })
    return
  end
  local client = client_mod.get()
  if not client then
    health.warn('no spd_lsp client is running', { 'Open a file, or call require("spd").setup{}' })
    return
  end
  local cmd = type(client.config.cmd) == 'table' and client.config.cmd or {}
  local exe = vim.fn.exepath(cmd[1] or '')
  health.ok(('server: %s (%s)'):format(exe ~= '' and exe or tostring(cmd[1]), table.concat(cmd, ' ')))
  local info = client.server_info or {}
  health.ok(('version: %s %s'):format(info.name or 'spd-lsp', info.version or '(not reported)'))
  health.info(('root: %s; position encoding: %s; log: %s'):format(client.root_dir or '-', client.offset_encoding,
    vim.lsp.get_log_path()))
  local status, err = server_status(client)
  if not status then
    health.error('spd.status failed: ' .. tostring(err))
    return
  end
  report_status(status)
end

return M
