--- spd-lsp for Neovim: starts the server, shows its k drafts as ghost text and maps the keys.
---
--- require('spd').setup({ k = 3, keymaps = { accept = '<Tab>' } })
local client_mod = require('spd.client')
local commands = require('spd.commands')

local M = {}

local ui ---@type table? spd.native (Neovim >= 0.12) or spd.ghost
local enabled = true
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
  ui = require('spd.native').available() and require('spd.native') or require('spd.ghost')
  if ui.setup then
    ui.setup(config)
  end
  local lhs = config.keymaps
  keys = vim.tbl_filter(function(key) return key.lhs end, {
    { lhs = lhs.accept, action = M.accept, desc = 'accept the draft' },
    { lhs = lhs.accept_word, action = M.accept_word, desc = 'accept the next word of the draft' },
    { lhs = lhs.next, action = M.next, desc = 'next draft' },
    { lhs = lhs.prev, action = M.prev, desc = 'previous draft' },
    { lhs = lhs.dismiss, action = M.dismiss, desc = 'dismiss the draft' },
  })
  vim.tbl_map(enabled and map or unmap, keys)

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

function M.next()
  return ui ~= nil and ui.cycle(1)
end

function M.prev()
  return ui ~= nil and ui.cycle(-1)
end

function M.dismiss()
  return ui ~= nil and ui.dismiss()
end

function M.toggle()
  if not ui then
    return vim.notify('spd: call require("spd").setup() first', vim.log.levels.WARN)
  end
  enabled = not enabled
  ui.set_enabled(enabled)
  vim.tbl_map(enabled and map or unmap, keys)
  vim.notify('SPD inline completions ' .. (enabled and 'on' or 'off'))
end

M.status = commands.status
M.index = commands.index

return M
