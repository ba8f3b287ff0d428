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
