--- spd-lsp for Neovim: starts the server, shows its k drafts as ghost text and maps the keys.
---
--- require('spd').setup({ k = 3, keymaps = { accept = '<Tab>' } })
local client_mod = require('spd.client')
local commands = require('spd.commands')
local state = require('spd.state')

local M = {}

local ui ---@type table? spd.native (Neovim >= 0.12) or spd.ghost
local mapped = false ---@type boolean whether our keys are mapped now
local fallbacks = {} ---@type table<string, table> mappings our keys shadow
local keys = {} ---@type { lhs: string, action: fun(): boolean, desc: string }[] our insert-mode keys

local function feed(keys, remap)
  vim.api.nvim_feedkeys(keys, remap and 'im' or 'in', false)
end

--- Gives the key its meaning without us: the mapping we replaced, else the key itself.
local function fall_through(lhs)
  local prev = fallbacks[lhs]
  if not prev then
    return feed(vim.keycode(lhs), false)
  end
  local rhs
  if prev.callback then
    rhs = prev.callback()
    if prev.expr ~= 1 then
      return
    end
  else
    rhs = prev.expr == 1 and vim.api.nvim_eval(prev.rhs) or prev.rhs
  end
  if type(rhs) == 'string' then
    feed(vim.keycode(rhs), prev.noremap ~= 1)
  end
end

local function map(key)
  local prev = vim.fn.maparg(key.lhs, 'i', false, true)
  if not vim.tbl_isempty(prev) and not (prev.desc or ''):match('^spd: ') then
    fallbacks[key.lhs] = prev
  end
  vim.keymap.set('i', key.lhs, function()
    if not (ui and key.action()) then
      fall_through(key.lhs)
    end
  end, { desc = 'spd: ' .. key.desc, silent = true })
end

--- Turned off, the keys are the user's again: their own mappings, else Neovim's meaning
--- (an unmapped <M-]> is <Esc>], not a `]` typed by us).
local function unmap(key)
  pcall(vim.keymap.del, 'i', key.lhs)
  if fallbacks[key.lhs] then
    vim.fn.mapset('i', false, fallbacks[key.lhs])
  end
end

---@param opts table? see spd.config.defaults
function M.setup(opts)
  local config = require('spd.config').resolve(opts)
  M.config = config
  ui = require('spd.native').available() and require('spd.native') or require('spd.ghost')
  if ui.setup then
    ui.setup(config)
  end
  local lhs = config.keymaps
  if mapped then
    vim.tbl_map(unmap, keys) -- a second setup() may change them
  end
  keys = vim.tbl_filter(function(key) return key.lhs end, {
    { lhs = lhs.accept, action = M.accept, desc = 'accept the draft' },
    { lhs = lhs.accept_word, action = M.accept_word, desc = 'accept the next word of the draft' },
    { lhs = lhs.accept_line, action = M.accept_line, desc = 'accept the next line of the draft' },
    { lhs = lhs.next, action = M.next, desc = 'next draft' },
    { lhs = lhs.prev, action = M.prev, desc = 'previous draft' },
    { lhs = lhs.dismiss, action = M.dismiss, desc = 'dismiss the draft' },
  })
  mapped = false
  M.refresh()

  local group = vim.api.nvim_create_augroup('spd', {})
  vim.api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == client_mod.name then
        client_mod.attached(args.buf)
        if ui.attach then
          ui.attach(args.buf)
        end
      end
    end,
  })
  vim.api.nvim_create_autocmd('LspProgress', { group = group, callback = commands.on_progress })
  client_mod.start(config)
  client_mod.update_settings(config)
end

--- Each returns whether there was a draft to act on.
function M.accept()
  return ui ~= nil and ui.accept()
end

function M.accept_word()
  return ui ~= nil and ui.accept_word()
end

function M.accept_line()
  return ui ~= nil and ui.accept_line()
end

function M.next()
  return ui ~= nil and ui.cycle(1)
end

function M.prev()
  return ui ~= nil and ui.cycle(-1)
end

function M.dismiss()
  return ui ~= nil and ui.dismiss()
end

--- Draws and maps as the state says: on, or off / snoozed (no drafts, the keys are the user's again).
function M.refresh()
  local active = state.active()
  if ui then
    ui.set_enabled(active)
  end
  if active ~= mapped then
    vim.tbl_map(active and map or unmap, keys)
    mapped = active
  end
end

state.subscribe(M.refresh)

function M.toggle()
  if not ui then
    return vim.notify('spd: call require("spd").setup() first', vim.log.levels.WARN)
  end
  local on = not state.active()
  state.set_enabled(on)
  vim.notify('SPD inline completions ' .. (on and 'on' or 'off'))
end

--- No drafts for `minutes` (default 15); 0 ends a snooze.
---@param minutes number?
function M.snooze(minutes)
  minutes = minutes or 15
  state.snooze(minutes)
  vim.notify(minutes > 0 and ('SPD inline completions snoozed for %s min'):format(minutes) or 'SPD inline completions on')
end

--- For a statusline: `SPD: off`, `SPD: snoozed 14m`, `SPD: loading the model`, `SPD: warming up`, `SPD: ready`, `SPD: error`;
--- ` (shared engine)` after it where the shared engine serves (`engine` "auto", the default).
M.statusline = state.statusline

M.status = commands.status
M.index = commands.index

return M
