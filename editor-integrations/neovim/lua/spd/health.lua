--- :checkhealth spd: the server command (and the virtual environment it lives in), its
--- version, the model (or why it did not load), the engine (in-process, or a shared/remote
--- one and whether it is reachable), and the stores.
local client_mod = require('spd.client')

local M = {}

local health = vim.health

local INSTALL = 'Install the server: `python3 -m venv .venv && .venv/bin/pip install -e .` in the spd-lsp checkout'
local SET_CMD = 'or point `cmd` in require("spd").setup{} at it, e.g. cmd = { "/path/to/.venv/bin/spd-lsp", "--stdio" }'

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

--- The interpreter a script's `#!` line names, when it is an absolute path (a venv's python).
---@return string?
local function shebang(path)
  local file = io.open(path, 'rb')
  if not file then
    return nil
  end
  local first = file:read('*l') or ''
  file:close()
  return first:match('^#!%s*(/%S+)')
end

--- The executable and the virtual environment behind it: an entry point whose Python is gone
--- (the venv was moved, deleted or rebuilt elsewhere) is found by the shell but cannot start.
---@return boolean ok
local function check_executable(cmd)
  local exe = vim.fn.exepath(cmd[1] or '')
  if exe == '' then
    health.error(('server executable not found: %s'):format(tostring(cmd[1])), { INSTALL, SET_CMD })
    return false
  end
  local python = shebang(exe)
  if python and vim.fn.executable(python) == 0 then
    health.error(('the server %s cannot start: its Python interpreter %s is missing (the virtual environment was moved or deleted)')
      :format(exe, python), { 'Recreate the virtual environment: ' .. INSTALL, SET_CMD })
    return false
  end
  health.ok(('server: %s (%s)'):format(exe, table.concat(cmd, ' ')))
  return true
end

local function report_model(status)
  local model = status.model
  if type(model) == 'table' then
    local mode = model.compiled == true and 'compiled' or 'eager'
    health.ok(('model: %s on %s (%s, %s)'):format(model.name or '?', model.device or '?', model.dtype or 'default dtype', mode))
  elseif status.error and status.error ~= vim.NIL then
    health.error('model: failed to load: ' .. tostring(status.error), {
      'Check `model` in require("spd").setup{}: a .gguf file, or a local Hugging Face folder with config.json (models are never downloaded)',
      'Remove `model` to use the bundled SmolLM2 model',
      'A shared engine (`engine` = "auto" or an address) loads the model itself: see its log',
    })
  else
    health.info('model: not loaded yet (it loads on the first completion)')
  end
end

--- The engine's log when it is the per-user shared one (`engine-<key>.sock` has `engine-<key>.log`).
local function engine_log(address)
  local socket = type(address) == 'string' and address:match('^unix:(.*engine%-%x+)%.sock$')
  return socket and (socket .. '.log') or nil
end

local function report_engine(link)
  if type(link) ~= 'table' or link.kind == 'in-process' then
    health.ok('engine: in-process (the model runs in the server)')
    return
  end
  local address = link.address ~= vim.NIL and link.address or 'the per-user socket'
  local failures = tonumber(link.failures) or 0
  if link.connected == false then
    local advice = engine_log(link.address) and {
      'The shared engine stopped or died; the next completion starts it again (engine = "auto")',
      'Its log: ' .. engine_log(link.address),
    } or {
      ('Start the engine: `spd-lsp engine --socket PATH` (unix:) or `spd-lsp engine --tcp PORT` on the machine at %s'):format(address),
      'or set engine = "in-process" (or "auto") in require("spd").setup{}',
    }
    health.error(('engine: %s at %s is not connected (it stopped or died); %d request(s) got no drafts')
      :format(link.kind, address, failures), advice)
  elseif failures > 0 then
    health.warn(('engine: %s at %s is connected, but %d request(s) got no answer from it'):format(link.kind, address, failures),
      { 'See the engine log and the server log (' .. vim.lsp.get_log_path() .. ')' })
  elseif link.connected == true then
    health.ok(('engine: %s at %s (connected)'):format(link.kind, address))
  else
    health.info(('engine: %s at %s (not connected yet: it connects on the first completion)'):format(link.kind, address))
  end
end

local function report_stores(status)
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
    health.error(('server executable not found; searched: %s'):format(table.concat(client_mod.missing.searched, '; ')), {
      'No virtual environment with spd-lsp in the working directory or above it, and none on $PATH',
      INSTALL,
      SET_CMD,
    })
    return
  end
  local client = client_mod.get()
  local cmd = client and type(client.config.cmd) == 'table' and client.config.cmd or client_mod.cmd
  if cmd and not check_executable(cmd) then
    return
  end
  if not client then
    health.warn('no spd_lsp client is running', { 'Open a file, or call require("spd").setup{}', 'Server log: ' .. vim.lsp.get_log_path() })
    return
  end
  local info = client.server_info or {}
  health.ok(('version: %s %s'):format(info.name or 'spd-lsp', info.version or '(not reported)'))
  health.info(('root: %s; position encoding: %s; log: %s'):format(client.root_dir or '-', client.offset_encoding,
    vim.lsp.get_log_path()))
  local status, err = server_status(client)
  if not status then
    health.error('spd.status failed: ' .. tostring(err))
    return
  end
  report_model(status)
  report_engine(status.engine)
  report_stores(status)
end

return M
