--- Neovim >= 0.12: the built-in vim.lsp.inline_completion draws, cycles and accepts;
--- this only enables it for spd_lsp buffers and adds accept-word and dismiss on top.
---
--- UNTESTED against a real Neovim 0.12: the tests run 0.11.4 and drive this module only
--- through a stub of the API it expects (enable(on, {bufnr}), select({count}),
--- get({on_accept})). Development versions of the module had other names (jump, no
--- enable), so it is used only when every function it calls exists; else the ghost path.
local api = vim.api
local ic = vim.lsp.inline_completion
local text = require('spd.text')

local M = {}

--- Whether this Neovim has the built-in module with the functions used here.
function M.available()
  ic = vim.lsp.inline_completion
  return type(ic) == 'table' and vim.iter({ 'enable', 'select', 'get' }):all(function(name)
    return type(ic[name]) == 'function'
  end)
end

local enabled = true
local buffers = {} ---@type table<integer, true>

function M.attach(bufnr)
  buffers[bufnr] = true
  ic.enable(enabled, { bufnr = bufnr })
end

---@return boolean handled
function M.accept()
  return ic.get()
end

--- Accepts `part` of the candidate (its next word or line) instead of all of it.
local function accept_part(part)
  return ic.get({
    on_accept = function(item)
      local bufnr = api.nvim_get_current_buf()
      local start = item.range and item.range.start
      local typed = start and text.typed_since(bufnr, start.row, start.col) or ''
      local rest = type(item.insert_text) == 'string' and typed and text.remainder(item.insert_text, typed)
      if rest then
        local pos = api.nvim_win_get_cursor(0)
        text.replace(bufnr, pos[1] - 1, pos[2], pos[1] - 1, pos[2], part(rest))
      end
    end,
  })
end

---@return boolean handled
function M.accept_word()
  return accept_part(text.first_word)
end

---@return boolean handled
function M.accept_line()
  return accept_part(text.first_line)
end

---@return boolean handled
function M.cycle(delta)
  ic.select({ count = delta })
  return true
end

--- The built-in module has no "dismiss": re-enabling it drops the shown candidate.
---@return boolean handled
function M.dismiss()
  local bufnr = api.nvim_get_current_buf()
  ic.enable(false, { bufnr = bufnr })
  ic.enable(enabled, { bufnr = bufnr })
  return true
end

function M.set_enabled(value)
  enabled = value
  for bufnr in pairs(buffers) do
    if api.nvim_buf_is_valid(bufnr) then
      ic.enable(value, { bufnr = bufnr })
    end
  end
end

return M
