--- :SpdIndex and :SpdStatus: server commands, their progress and their answers.
local client_mod = require('spd.client')

local M = {}

local function scalar(value)
  if value == vim.NIL or value == nil then
    return 'none'
  elseif type(value) == 'number' then
    return value == math.floor(value) and tostring(value) or ('%.1f'):format(value)
  end
  return tostring(value)
end

--- Flattens a result into readable "a.b: value" lines whatever its shape: objects by key,
--- lists of objects as `stores[1].root`, lists of plain values joined.
---@return string[]
function M.format(value, prefix)
  prefix = prefix or 'result'
  if type(value) ~= 'table' then
    return { ('%s: %s'):format(prefix, scalar(value)) }
  end
  if vim.islist(value) and not vim.iter(value):any(function(item) return type(item) == 'table' end) then
    return { ('%s: %s'):format(prefix, #value == 0 and 'none' or table.concat(vim.tbl_map(scalar, value), ', ')) }
  end
  local lines = {}
  local keys = vim.islist(value) and vim.fn.range(1, #value) or vim.fn.sort(vim.tbl_keys(value))
  for _, key in ipairs(keys) do
    local name = type(key) == 'number' and ('%s[%d]'):format(prefix, key) or (prefix == '' and key or prefix .. '.' .. key)
    vim.list_extend(lines, M.format(value[key], name))
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

--- The lines :SpdStatus shows: the server's `summary` (readable lines: model, engine, stores,
--- the last request's timings, drafts accepted by rank), or, with `details` or from a server
--- without one, every field as "a.b: value".
---@param details boolean?
---@return string[] lines, string filetype
function M.status_lines(result, details)
  local summary = type(result) == 'table' and result.summary
  if type(summary) == 'string' and not details then
    return vim.split(summary, '\n', { trimempty = true }), 'text'
  end
  if type(result) == 'table' then
    result = vim.deepcopy(result)
    result.summary = nil
  end
  return M.format(result, ''), 'yaml'
end

--- :SpdStatus[!] in a float sized to show every line (! for every field).
---@param opts { bang: boolean? }?
function M.status(opts)
  local details = opts and opts.bang
  local config = require('spd').config
  local buffer_filetype = vim.bo.filetype
  local on = config == nil or require('spd.config').enabled_for(config, buffer_filetype)
  run('spd.status', function(result)
    local lines, filetype = M.status_lines(result, details)
    if not details then
      lines = vim.list_extend(require('spd.state').describe(buffer_filetype, on), lines)
    end
    local width = math.min(vim.o.columns - 4, math.max(unpack(vim.tbl_map(vim.fn.strdisplaywidth, lines))))
    vim.lsp.util.open_floating_preview(lines, filetype, {
      border = 'rounded',
      title = details and ' SPD status (all fields) ' or ' SPD status ',
      focus_id = details and 'spd.status.fields' or 'spd.status', -- a second :SpdStatus enters the float
      width = width,
      height = math.min(#lines, vim.o.lines - 4),
      wrap = false,
    })
  end)
end

local indexing = false ---@type boolean an :SpdIndex whose end is still to be reported

--- The store's totals once indexing ends: "0 files" from an up-to-date store means nothing
--- changed, not nothing indexed.
local function report_totals()
  run('spd.status', function(result)
    for _, store in ipairs(type(result) == 'table' and result.stores or {}) do
      vim.api.nvim_echo({ { ('SPD: %s is indexed: %s files, %s tokens in the store'):format(store.root, scalar(store.files),
        scalar(store.tokens)) } }, true, {})
    end
  end)
end

--- Starts indexing; the server reports progress, echoed by on_progress.
function M.index()
  indexing = true -- the server may report the end before it answers
  run('spd.indexWorkspace', function(result)
    local started = type(result) == 'table' and result.started
    indexing = indexing and started == true
    vim.notify(started and 'SPD: indexing the workspace' or 'SPD: nothing to index (no workspace folder, or n-grams off)')
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
  local done = value.kind == 'end'
  local parts = { 'SPD:', titles[token] .. ((done and indexing) and ': this run:' or '') }
  if value.percentage and not done then
    parts[#parts + 1] = ('%d%%'):format(value.percentage)
  end
  parts[#parts + 1] = value.message
  vim.api.nvim_echo({ { table.concat(parts, ' ') } }, done, {})
  if done then
    titles[token] = nil
    if indexing then
      indexing = false
      report_totals()
    end
  end
end

return M
