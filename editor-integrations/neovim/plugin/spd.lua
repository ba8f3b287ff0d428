if vim.g.loaded_spd then
  return
end
vim.g.loaded_spd = true

if vim.fn.has('nvim-0.10') == 0 then
  vim.notify('spd: Neovim 0.10 or newer is required', vim.log.levels.WARN)
  return
end

local command = vim.api.nvim_create_user_command
command('SpdIndex', function() require('spd').index() end, { desc = 'Index the workspace into the n-gram store' })
command('SpdStatus', function(args) require('spd').status({ bang = args.bang }) end,
  { bang = true, desc = 'Show what the server does (! for every field)' })
command('SpdToggle', function() require('spd').toggle() end, { desc = 'Turn inline completions on or off' })
command('SpdSnooze', function(args) require('spd').snooze(tonumber(args.args)) end,
  { nargs = '?', desc = 'No drafts for a while: minutes (default 15; 0 ends the snooze)' })

-- <Plug> maps of every action, to map keys of your own (with `keymaps` entries set to false):
--   vim.keymap.set('i', '<C-l>', '<Plug>(spd-accept)')
local function plug(name, modes, action)
  vim.keymap.set(modes, '<Plug>(spd-' .. name .. ')', function() require('spd')[action]() end,
    { silent = true, desc = 'spd: ' .. name })
end
for name, action in pairs({ accept = 'accept', ['accept-word'] = 'accept_word', ['accept-line'] = 'accept_line',
  next = 'next', prev = 'prev', dismiss = 'dismiss' }) do
  plug(name, 'i', action)
end
plug('toggle', { 'n', 'i' }, 'toggle')
plug('snooze', { 'n', 'i' }, 'snooze')
