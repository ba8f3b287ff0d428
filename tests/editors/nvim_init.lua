-- Minimal init for the Neovim tests: the plugin on the runtimepath, setup{} from $SPD_TEST_SETUP (JSON).
vim.opt.runtimepath:prepend(os.getenv('SPD_PLUGIN_DIR'))
vim.opt.swapfile = false
local setup = os.getenv('SPD_TEST_SETUP')
if setup and setup ~= '' then
  require('spd').setup(vim.json.decode(setup))
end
