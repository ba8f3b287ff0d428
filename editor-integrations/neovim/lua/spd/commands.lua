--- :SpdIndex and :SpdStatus: server commands, their progress and their answers.
local client_mod = require('spd.client')

local M = {}

--- Flattens a result object into "a.b: value" lines, whatever its exact shape.
---@return string[]
function M.format(value, prefix)
  if type(value) ~= 'table' or vim.islist(value) then
    return { ('%s: %s'):format(prefix or 'result', vim.inspect(value, { newline = ' ', indent = '' })) }
  end
  local lines = {}
  for _, key in ipairs(vim.fn.sort(vim.tbl_keys(value))) do
    local name = prefix and (prefix .. '.' .. key) or key
    local item = value[key]
    if type(item) == 'table' and not vim.islist(item) then
      vim.list_extend(lines, M.format(item, name))
    else
      lines[#lines + 1] = ('%s: %s'):format(name, type(item) == 'string' and item or vim.inspect(item, { newline = ' ', indent = '' }))
    end
  end
  return lines
end

---@param on_result fun(result: any)
local function run(command, on_result)
  local client = client_mod.get(0) or client_mod.get()
  if not client then
    vim.notify('spd: the spd_lsp server is not running in this session', vim.log.levels.WARN)
    return
  end
  client_mod.execute(client, command, {}, function(err, result)
    if err then
      vim.notify(('spd: %s failed: %s'):format(command, err.message), vim.log.levels.ERROR)
    else
      on_result(result)
    end
  end)
end

--- Model, device, stores and latency percentiles, in a float (too long for the message area).
function M.status()
  run('spd.status', function(result)
    vim.lsp.util.open_floating_preview(M.format(result), 'yaml', {
      border = 'rounded',
      title = ' SPD status ',
      focus_id = 'spd.status',
    })
  end)
end

--- Starts indexing; the server reports progress, echoed by on_progress.
function M.index()
  run('spd.indexWorkspace', function(result)
    vim.notify('SPD: index workspace: ' .. table.concat(M.format(result), ', '))
  end)
end

local titles = {} ---@type table<integer|string, string> progress token -> title

--- Echoes the server's `$/progress` (indexing) in the command line; only the end is kept
--- in :messages, so a large workspace does not flood the history.
---@param args { data: { client_id: integer, params: { token: integer|string, value: table } } }
function M.on_progress(args)
  local client = vim.lsp.get_client_by_id(args.data.client_id)
  local token, value = args.data.params.token, args.data.params.value
  if not client or client.name ~= client_mod.name or type(value) ~= 'table' then
    return
  end
  titles[token] = value.title or titles[token] or 'working'
  local parts = { 'SPD:', titles[token] }
  if value.percentage then
    parts[#parts + 1] = ('%d%%'):format(value.percentage)
  end
  parts[#parts + 1] = value.message
  local done = value.kind == 'end'
  if done then
    titles[token] = nil
  end
  vim.api.nvim_echo({ { table.concat(parts, ' ') } }, done, {})
end

return M
