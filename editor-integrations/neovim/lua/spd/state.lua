--- Where spd stands, for the statusline and :SpdStatus: the server's pushed readiness
--- (`spd/didChangeStatus`: loading, warming, ready, error) and the client's own on / off / snoozed.
local M = {}

M.METHOD = 'spd/didChangeStatus'

local server = { state = 'starting', message = 'starting the server' } ---@type { state: string, message: string?, model: table? }
local enabled = true
local snoozed_until = nil ---@type integer? uv.now() in ms
local timer = nil ---@type uv.uv_timer_t?
local on_change = {} ---@type fun()[] called when completions turn on or off (toggle, snooze, its end)

local LABELS = { loading = 'loading the model', warming = 'warming up', ready = 'ready', error = 'error' }

local function changed()
  vim.schedule(function()
    vim.api.nvim_exec_autocmds('User', { pattern = 'SpdStatus', modeline = false })
  end)
end

--- The `spd/didChangeStatus` handler: the server's readiness, pushed on every change.
function M.on_status(_, result)
  if type(result) == 'table' and type(result.state) == 'string' then
    server = { state = result.state, message = result.message, model = result.model }
    changed()
  end
end

---@return { state: string, message: string?, model: table? }
function M.server()
  return server
end

--- Whether drafts are wanted now: on, and not snoozed.
function M.active()
  return enabled and not M.snoozed()
end

function M.enabled()
  return enabled
end

--- Minutes left of a snooze (rounded up), or nil.
function M.snoozed()
  if not snoozed_until then
    return nil
  end
  local left = snoozed_until - vim.uv.now()
  return left > 0 and math.ceil(left / 60000) or nil
end

---@param fn fun()
function M.subscribe(fn)
  on_change[#on_change + 1] = fn
end

local function notify_change()
  for _, fn in ipairs(on_change) do
    fn()
  end
  changed()
end

local function wake()
  if timer then
    timer:stop()
    timer:close()
    timer = nil
  end
  snoozed_until = nil
end

--- On or off (a snooze ends either way).
function M.set_enabled(value)
  enabled = value
  wake()
  notify_change()
end

--- No drafts for `minutes` (0: end the snooze now).
---@param minutes number
function M.snooze(minutes)
  wake()
  if minutes and minutes > 0 then
    snoozed_until = vim.uv.now() + math.floor(minutes * 60000)
    timer = vim.uv.new_timer()
    timer:start(math.floor(minutes * 60000), 0, vim.schedule_wrap(function()
      M.snooze(0)
    end))
  end
  notify_change()
end

--- Which engine serves, where it is not the server itself: ` (shared engine)` (one model for every
--- window: `engine` "auto", the default) or ` (remote engine)`; '' in process or before the model loaded.
local function engine_label()
  local kind = type(server.model) == 'table' and server.model.engineKind or nil
  return (type(kind) == 'string' and kind ~= 'in-process') and (' (%s engine)'):format(kind) or ''
end

--- One short line for a statusline: `SPD: off`, `SPD: snoozed 14m`, `SPD: loading the model`,
--- `SPD: warming up`, `SPD: ready`, `SPD: error`; with ` (shared engine)` where the shared engine serves.
function M.statusline()
  if not enabled then
    return 'SPD: off'
  end
  local minutes = M.snoozed()
  if minutes then
    return ('SPD: snoozed %dm'):format(minutes)
  end
  return 'SPD: ' .. (LABELS[server.state] or server.state) .. engine_label()
end

--- The client's line of :SpdStatus (the server's own lines, its state among them, follow).
function M.describe(filetype, filetype_on)
  local head = not enabled and 'off (:SpdToggle turns it on)'
    or (M.snoozed() and ('snoozed for %d more min (:SpdSnooze 0 ends it)'):format(M.snoozed()))
    or 'on'
  return { ('Client:   %s; filetype %s: %s'):format(head, filetype ~= '' and filetype or '(none)',
    filetype_on and 'completed' or 'off') }
end

return M
