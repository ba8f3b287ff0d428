-- spd-lsp: local AI inline completions (Superposed Decoding drafts).
-- Usable as is with `vim.lsp.enable('spd_lsp')` (Neovim >= 0.11) and by nvim-lspconfig;
-- `require('spd').setup{}` layers its options on top of it.
--
-- Settings follow the server's contract (camelCase), sent both as
-- initializationOptions and as `workspace/didChangeConfiguration` {settings = {spd = ...}}.

---@type vim.lsp.Config
return {
  cmd = { 'spd-lsp', '--stdio' },
  -- Every filetype: the model completes any text.
  filetypes = nil,
  root_dir = function(bufnr, on_dir)
    on_dir(vim.fs.root(bufnr, { '.git', '.hg', 'pyproject.toml', 'package.json' }) or vim.fn.getcwd())
  end,
  init_options = {},
  settings = { spd = {} },
}
