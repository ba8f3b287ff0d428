return 
{ {
    name = "15puzzle.nvim",
    url = "NStefan002/15puzzle.nvim",
    version = "1.4.1-1"
  }, {
    name = "2048.nvim",
    url = "NStefan002/2048.nvim",
    version = "2.8.2-1"
  }, {
    name = "adopure.nvim",
    url = "Willem-J-an/adopure.nvim",
    version = "2.1.1-1"
  }, {
    name = "aerial.nvim",
    url = "stevearc/aerial.nvim",
    version = "2.6.1-1"
  }, {
    name = "age.nvim",
    url = "KingMichaelPark/age.nvim",
    version = "0.1.0-1"
  }, {
    name = "ai.nvim",
    url = "S1M0N38/ai.nvim",
    version = "1.6.0-1"
  }, {
    name = "altf.nvim",
    url = "wsdjeg/altf.nvim",
    version = "1.2.0-1"
  }, {
    name = "ascii-ui.nvim",
    url = "rcasia/ascii-ui.nvim",
    version = "0.6.1-1"
  }, {
    name = "astral.nvim",
    url = "rootiest/astral.nvim",
    version = "1.0.9-1"
  }, {
    name = "auto-hlsearch.nvim",
    url = "asiryk/auto-hlsearch.nvim",
    version = "1.1.0-1"
  }, {
    name = "auto-theme.nvim",
    url = "barrett-ruth/auto-theme.nvim",
    version = "0.2.0-1"
  }, {
    name = "avante.nvim",
    url = "yetone/avante.nvim",
    version = "0.0.27-1"
  }, {
    name = "banana.nvim",
    url = "CWood-sdf/banana.nvim",
    version = "0.3.0-1"
  }, {
    name = "bars-n-lines.nvim",
    url = "OXY2DEV/bars-N-lines.nvim",
    version = "1.0.0-1"
  }, {
    name = "bars.nvim",
    url = "OXY2DEV/bars.nvim",
    version = "2.2.0-1"
  }, {
    name = "base.nvim",
    url = "S1M0N38/base.nvim",
    version = "2.0.0-1"
  }, {
    name = "better-escape.nvim",
    url = "max397574/better-escape.nvim",
    version = "2.3.3-1"
  }, {
    name = "blaze.nvim",
    url = "qompassai/blaze.nvim",
    version = "1.0-1"
  }, {
    name = "blink.cmp",
    url = "Saghen/blink.cmp",
    version = "1.8.0-1"
  }, {
    name = "bookmarks.nvim",
    url = "wsdjeg/bookmarks.nvim",
    version = "1.1.0-1"
  }, {
    name = "bufdel.nvim",
    url = "wsdjeg/bufdel.nvim",
    version = "1.1.0-1"
  }, {
    name = "bufferline.nvim",
    url = "akinsho/bufferline.nvim",
    version = "4.9.1-1"
  }, {
    name = "care.nvim",
    url = "max397574/care.nvim",
    version = "0.1.0-1"
  }, {
    name = "ccc.nvim",
    url = "uga-rosa/ccc.nvim",
    version = "2.0.3-1"
  }, {
    name = "ccusage.nvim",
    url = "S1M0N38/ccusage.nvim",
    version = "1.0.3-1"
  }, {
    name = "chatml.nvim",
    url = "S1M0N38/chatml.nvim",
    version = "1.0.0-1"
  }, {
    name = "ci-template.nvim",
    url = "linrongbin16/ci-template.nvim",
    version = "8.1.0-1"
  }, {
    name = "cinnamon.nvim",
    url = "declancm/cinnamon.nvim",
    version = "1.2.5-1"
  }, {
    name = "cmp-rg",
    url = "lukas-reineke/cmp-rg",
    version = "1.3.11-1"
  }, {
    name = "code-runner.nvim",
    url = "wsdjeg/code-runner.nvim",
    version = "1.1.0-1"
  }, {
    name = "code-stats.nvim",
    url = "Freed-Wu/code-stats.nvim",
    version = "0.1.0-1"
  }, {
    name = "colorbox.nvim",
    url = "linrongbin16/colorbox.nvim",
    version = "3.2.1-1"
  }, {
    name = "colorbuddy.nvim",
    url = "tjdevries/colorbuddy.nvim",
    version = "1.0.0-1"
  }, {
    name = "colortils.nvim",
    url = "nvim-colortils/colortils.nvim",
    version = "1.2.0-1"
  }, {
    name = "command.nvim",
    url = "cultab/command.nvim",
    version = "0.2.0-1"
  }, {
    name = "commander.nvim",
    url = "FeiyouG/commander.nvim",
    version = "0.2.0-1"
  }, {
    name = "comment-box.nvim",
    url = "LudoPinelli/comment-box.nvim",
    version = "1.0.2-1"
  }, {
    name = "comment.nvim",
    url = "numToStr/Comment.nvim",
    version = "0.8.0-1"
  }, {
    name = "commons.nvim",
    url = "linrongbin16/commons.nvim",
    version = "27.0.0-1"
  }, {
    name = "conform.nvim",
    url = "stevearc/conform.nvim",
    version = "9.1.0-1"
  }, {
    name = "coop.nvim",
    url = "gregorias/coop.nvim",
    version = "1.1.1-0"
  }, {
    name = "copy-diagnostics.nvim",
    url = "NickStafford2/copy-diagnostics.nvim",
    version = "main-1"
  }, {
    name = "cord.nvim",
    url = "vyfor/cord.nvim",
    version = "2.3.8-1"
  }, {
    name = "cp.nvim",
    url = "barrett-ruth/cp.nvim",
    version = "0.5.0-1"
  }, {
    name = "cpicker.nvim",
    url = "wsdjeg/cpicker.nvim",
    version = "1.1.0-1"
  }, {
    name = "cppinsights.nvim",
    url = "Freed-Wu/cppinsights.nvim",
    version = "20.1-1"
  }, {
    name = "ctags.nvim",
    url = "wsdjeg/ctags.nvim",
    version = "1.1.0-1"
  }, {
    name = "ctrlg.nvim",
    url = "wsdjeg/ctrlg.nvim",
    version = "1.0.0-1"
  }, {
    name = "ctx.nvim",
    url = "S1M0N38/ctx.nvim",
    version = "1.0.0-1"
  }, {
    name = "cursor-text-objects.nvim",
    url = "ColinKennedy/cursor-text-objects.nvim",
    version = "2.0.0-1"
  }, {
    name = "cybu.nvim",
    url = "ghillb/cybu.nvim",
    version = "1.0-1"
  }, {
    name = "dante.nvim",
    url = "S1M0N38/dante.nvim",
    version = "1.3.1-1"
  }, {
    name = "daylight.nvim",
    url = "NTBBloodbath/daylight.nvim",
    version = "1.1.0-1"
  }, {
    name = "deadcolumn.nvim",
    url = "Bekaboo/deadcolumn.nvim",
    version = "1.0.1-1"
  }, {
    name = "decasify.nvim",
    url = "alerque/decasify",
    version = "0.11.2-1"
  }, {
    name = "decipher.nvim",
    url = "MisanthropicBit/decipher.nvim",
    version = "2.1.0-1"
  }, {
    name = "delog.nvim",
    url = "ej-shafran/delog.nvim",
    version = "0.0.2-1"
  }, {
    name = "detour.nvim",
    url = "carbon-steel/detour.nvim",
    version = "2.0.1-1"
  }, {
    name = "dial.nvim",
    url = "monaqa/dial.nvim",
    version = "0.5.1-1"
  }, {
    name = "distant.nvim",
    url = "chipsenkbeil/distant.nvim",
    version = "0.1.2-1"
  }, {
    name = "donut.nvim",
    url = "NStefan002/donut.nvim",
    version = "2.2.1-1"
  }, {
    name = "donutlify.nvim",
    url = "NStefan002/donutlify.nvim",
    version = "1.0.0-1"
  }, {
    name = "doris.nvim",
    url = "jackokring/doris.nvim",
    version = "0.3.2-1"
  }, {
    name = "down.nvim",
    url = "clpi/down.nvim",
    version = "master-1"
  }, {
    name = "dressing.nvim",
    url = "stevearc/dressing.nvim",
    version = "3.1.1-1"
  }, {
    name = "dropbar.nvim",
    url = "Bekaboo/dropbar.nvim",
    version = "14.2.1-1"
  }, {
    name = "duck.nvim",
    url = "tamton-aquib/duck.nvim",
    version = "main-1"
  }, {
    name = "easypick.nvim",
    url = "axkirillov/easypick.nvim",
    version = "0.6.0-1"
  }, {
    name = "edgy.nvim",
    url = "folke/edgy.nvim",
    version = "1.10.2-1"
  }, {
    name = "efmls-configs-nvim",
    url = "creativenull/efmls-configs-nvim",
    version = "1.10.1-1"
  }, {
    name = "elixir-tools.nvim",
    url = "elixir-tools/elixir-tools.nvim",
    version = "0.18.0-1"
  }, {
    name = "fake.nvim",
    url = "Kibadda/fake.nvim",
    version = "4.1.0-1"
  }, {
    name = "fcitx5-ui.nvim",
    url = "black-desk/fcitx5-ui.nvim",
    version = "0.1.7-1"
  }, {
    name = "feed.nvim",
    url = "neo451/feed.nvim",
    version = "2.19.2-1"
  }, {
    name = "feline.nvim",
    url = "freddiehaddad/feline.nvim",
    version = "1.7.1-1"
  }, {
    name = "fidget.nvim",
    url = "j-hui/fidget.nvim",
    version = "1.6.0-1"
  }, {
    name = "firenvim",
    url = "glacambre/firenvim",
    version = "0.2.16-1"
  }, {
    name = "flash.nvim",
    url = "folke/flash.nvim",
    version = "2.1.0-1"
  }, {
    name = "flatten.nvim",
    url = "willothy/flatten.nvim",
    version = "0.5.1-1"
  }, {
    name = "flutter-tools.nvim",
    url = "akinsho/flutter-tools.nvim",
    version = "1.14.0-1"
  }, {
    name = "flygrep.nvim",
    url = "wsdjeg/flygrep.nvim",
    version = "1.3.0-1"
  }, {
    name = "focus.nvim",
    url = "nvim-focus/focus.nvim",
    version = "1.0.2-1"
  }, {
    name = "foldtext.nvim",
    url = "OXY2DEV/foldtext.nvim",
    version = "2.0.0-1"
  }, {
    name = "format.nvim",
    url = "wsdjeg/format.nvim",
    version = "1.4.0-1"
  }, {
    name = "freeze-code.nvim",
    url = "AlejandroSuero/freeze-code.nvim",
    version = "0.2.0-1"
  }, {
    name = "fugit2.nvim",
    url = "SuperBo/fugit2.nvim",
    version = "0.2.1-1"
  }, {
    name = "funnyfiles.nvim",
    url = "aikooo7/funnyfiles.nvim",
    version = "1.0.1-1"
  }, {
    name = "fzfx.nvim",
    url = "linrongbin16/fzfx.nvim",
    version = "8.2.6-1"
  }, {
    name = "galileo.nvim",
    url = "S1M0N38/galileo.nvim",
    version = "0.0.2-1"
  }, {
    name = "gemini.nvim",
    url = "prime-run/gemini.nvim",
    version = "0.1.2-1"
  }, {
    name = "gentags.nvim",
    url = "linrongbin16/gentags.nvim",
    version = "3.0.3-1"
  }, {
    name = "git-worktree.nvim",
    url = "polarmutex/git-worktree.nvim",
    version = "2.1.0-1"
  }, {
    name = "git.nvim",
    url = "Kibadda/git.nvim",
    version = "5.4.0-1"
  }, {
    name = "git2.nvim",
    url = "Freed-Wu/git2.nvim",
    version = "0.0.6-1"
  }, {
    name = "github-nvim-theme",
    url = "projekt0n/github-nvim-theme",
    version = "1.1.2-1"
  }, {
    name = "github.nvim",
    url = "wsdjeg/github.nvim",
    version = "0.1.0-1"
  }, {
    name = "gitlink.nvim",
    url = "wsdjeg/gitlink.nvim",
    version = "1.0.0-1"
  }, {
    name = "gitlinker.nvim",
    url = "linrongbin16/gitlinker.nvim",
    version = "5.3.0-1"
  }, {
    name = "gitsigns.nvim",
    url = "lewis6991/gitsigns.nvim",
    version = "1.0.2-1"
  }, {
    name = "glow.nvim",
    url = "ellisonleao/glow.nvim",
    version = "0.2.0-1"
  }, {
    name = "go.nvim",
    url = "ray-x/go.nvim",
    version = "0.10.4-1"
  }, {
    name = "godo.nvim",
    url = "arthuradolfo/godo.nvim",
    version = "1.1.0-0"
  }, {
    name = "grapple.nvim",
    url = "cbochs/grapple.nvim",
    version = "0.30.0-1"
  }, {
    name = "grug-far.nvim",
    url = "MagicDuck/grug-far.nvim",
    version = "1.6.53-1"
  }, {
    name = "gruvbox.nvim",
    url = "ellisonleao/gruvbox.nvim",
    version = "2.0.0-1"
  }, {
    name = "gtags.nvim",
    url = "wsdjeg/gtags.nvim",
    version = "0.2.0-1"
  }, {
    name = "guard.nvim",
    url = "nvimdev/guard.nvim",
    version = "2.6.2-1"
  }, {
    name = "hardhat.nvim",
    url = "TheSnakeWitcher/hardhat.nvim",
    version = "0.1.0-1"
  }, {
    name = "hardtime.nvim",
    url = "m4xshen/hardtime.nvim",
    version = "1.2.0-1"
  }, {
    name = "haskell-snippets.nvim",
    url = "mrcjkb/haskell-snippets.nvim",
    version = "1.5.0-1"
  }, {
    name = "haskell-tools.nvim",
    url = "mrcjkb/haskell-tools.nvim",
    version = "6.2.0-1"
  }, {
    name = "headlines.nvim",
    url = "lukas-reineke/headlines.nvim",
    version = "5.0.0-1"
  }, {
    name = "heirline.nvim",
    url = "rebelot/heirline.nvim",
    version = "1.0.8-1"
  }, {
    name = "helpview.nvim",
    url = "OXY2DEV/helpview.nvim",
    version = "2.1.2-1"
  }, {
    name = "hibiscus.nvim",
    url = "udayvir-singh/hibiscus.nvim",
    version = "1.7-1"
  }, {
    name = "hlchunk.nvim",
    url = "shellRaining/hlchunk.nvim",
    version = "1.3.0-1"
  }, {
    name = "hop.nvim",
    url = "wsdjeg/hop.nvim",
    version = "2.8.1-1"
  }, {
    name = "hotpot.nvim",
    url = "rktjmp/hotpot.nvim",
    version = "0.14.8-1"
  }, {
    name = "hurl.nvim",
    url = "jellydn/hurl.nvim",
    version = "2.2.0-1"
  }, {
    name = "hydra.nvim",
    url = "nvimtools/hydra.nvim",
    version = "1.0.3-1"
  }, {
    name = "iedit.nvim",
    url = "wsdjeg/iedit.nvim",
    version = "1.1.0-1"
  }, {
    name = "image.nvim",
    url = "3rd/image.nvim",
    version = "1.3.0-1"
  }, {
    name = "ime.nvim",
    url = "rimeinn/ime.nvim",
    version = "0.0.8-1"
  }, {
    name = "incline.nvim",
    url = "b0o/incline.nvim",
    version = "0.1.0-1"
  }, {
    name = "indent-blankline.nvim",
    url = "lukas-reineke/indent-blankline.nvim",
    version = "3.9.0-1"
  }, {
    name = "jieba.nvim",
    url = "Freed-Wu/jieba.nvim",
    version = "5.6.0-1"
  }, {
    name = "job.nvim",
    url = "wsdjeg/job.nvim",
    version = "1.3.0-1"
  }, {
    name = "kai.nvim",
    url = "Kamilcuk/kai.nvim",
    version = "0.0.6-1"
  }, {
    name = "kanban.nvim",
    url = "Kibadda/kanban.nvim",
    version = "1.4.0-1"
  }, {
    name = "keymap-guide.nvim",
    url = "wsdjeg/keymap-guide.nvim",
    version = "0.1.0-1"
  }, {
    name = "kube.nvim",
    url = "mimparat132/kube.nvim",
    version = "1.2.0-1"
  }, {
    name = "lazy.nvim",
    url = "folke/lazy.nvim",
    version = "11.17.5-1"
  }, {
    name = "lazydev.nvim",
    url = "folke/lazydev.nvim",
    version = "1.10.0-1"
  }, {
    name = "lean.nvim",
    url = "Julian/lean.nvim",
    version = "2025.10.1-1"
  }, {
    name = "leetcode.nvim",
    url = "kawre/leetcode.nvim",
    version = "0.3.1-1"
  }, {
    name = "legendary.nvim",
    url = "mrjones2014/legendary.nvim",
    version = "2.13.13-1"
  }, {
    name = "live-command.nvim",
    url = "smjonas/live-command.nvim",
    version = "2.2.0-1"
  }, {
    name = "live-preview.nvim",
    url = "brianhuster/live-preview.nvim",
    version = "0.9.5-1"
  }, {
    name = "logevent.nvim",
    url = "wsdjeg/logevent.nvim",
    version = "1.0.0-1"
  }, {
    name = "logger.nvim",
    url = "wsdjeg/logger.nvim",
    version = "1.1.0-1"
  }, {
    name = "logging.nvim",
    url = "NTBBloodbath/logging.nvim",
    version = "1.1.0-1"
  }, {
    name = "love2d.nvim",
    url = "S1M0N38/love2d.nvim",
    version = "2.1.0-1"
  }, {
    name = "lsp-format.nvim",
    url = "lukas-reineke/lsp-format.nvim",
    version = "2.7.2-1"
  }, {
    name = "lsp-progress.nvim",
    url = "linrongbin16/lsp-progress.nvim",
    version = "1.0.15-1"
  }, {
    name = "lsp_signature.nvim",
    url = "ray-x/lsp_signature.nvim",
    version = "0.3.1-1"
  }, {
    name = "ltreesitter",
    url = "euclidianAce/ltreesitter",
    version = "0.2.0-1"
  }, {
    name = "ltreesitter-ts",
    url = "FourierTransformer/ltreesitter-ts",
    version = "0.0.1-1"
  }, {
    name = "lua-console.nvim",
    url = "YaroSpace/lua-console.nvim",
    version = "1.2.5-1"
  }, {
    name = "lua-obfuscator.nvim",
    url = "git+ssh://git@github.com/kdssoftware/lua-obfuscator.nvim.git",
    version = "1.0.1-1"
  }, {
    name = "lua-tree-sitter",
    url = "xcb-xwii/lua-tree-sitter",
    version = "0.1.2-1"
  }, {
    name = "lua-utils.nvim",
    url = "nvim-neorg/lua-utils.nvim",
    version = "1.0.2-1"
  }, {
    name = "luarocks-build-tree-sitter-cli",
    url = "FourierTransformer/luarocks-build-tree-sitter-cli",
    version = "0.0.2-1"
  }, {
    name = "luarocks-build-treesitter-parser",
    url = "nvim-neorocks/luarocks-build-treesitter-parser",
    version = "6.0.1-1"
  }, {
    name = "luarocks-build-treesitter-parser-cpp",
    url = "nvim-neorocks/luarocks-build-treesitter-parser-cpp",
    version = "2.0.5-1"
  }, {
    name = "mag-nvim-lsp",
    url = "iguanacucumber/mag-nvim-lsp",
    version = "0.2-1"
  }, {
    name = "mag-nvim-lua",
    url = "iguanacucumber/mag-nvim-lua",
    version = "0.1-1"
  }, {
    name = "magazine.nvim",
    url = "iguanacucumber/magazine.nvim",
    version = "0.4.5-1"
  }, {
    name = "mapx.nvim",
    url = "b0o/mapx.nvim",
    version = "0.2.1-1"
  }, {
    name = "markdoc.nvim",
    url = "OXY2DEV/markdoc.nvim",
    version = "1.1.0-1"
  }, {
    name = "markdown-plus.nvim",
    url = "YousefHadder/markdown-plus.nvim",
    version = "1.9.1-1"
  }, {
    name = "markview.nvim",
    url = "OXY2DEV/markview.nvim",
    version = "27.0.0-1"
  }, {
    name = "mason-lspconfig.nvim",
    url = "williamboman/mason-lspconfig.nvim",
    version = "2.1.0-1"
  }, {
    name = "mason-nvim-dap.nvim",
    url = "jay-babu/mason-nvim-dap.nvim",
    version = "2.5.2-1"
  }, {
    name = "mason.nvim",
    url = "williamboman/mason.nvim",
    version = "2.1.0-1"
  }, {
    name = "mdtypes.nvim",
    url = "OXY2DEV/mdtypes.nvim",
    version = "1.0.0-1"
  }, {
    name = "melange-nvim",
    url = "savq/melange-nvim",
    version = "0.9.0-1"
  }, {
    name = "meow.yarn.nvim",
    url = "retran/meow.yarn.nvim",
    version = "0.1.1-1"
  }, {
    name = "mini.nvim",
    url = "echasnovski/mini.nvim",
    version = "0.16.0-1"
  }, {
    name = "minuet-ai.nvim",
    url = "milanglacier/minuet-ai.nvim",
    version = "0.8.0-1"
  }, {
    name = "mkdnflow.nvim",
    url = "jakewvincent/mkdnflow.nvim",
    version = "1.2.4-1"
  }, {
    name = "mona.nvim",
    url = "hydepwns/mona.nvim",
    version = "0.1.4-1"
  }, {
    name = "move.nvim",
    url = "fedepujol/move.nvim",
    version = "2.0.0-1"
  }, {
    name = "mru.nvim",
    url = "wsdjeg/mru.nvim",
    version = "1.4.0-1"
  }, {
    name = "multicursors.nvim",
    url = "smoka7/multicursors.nvim",
    version = "2.0.0-1"
  }, {
    name = "music-player.nvim",
    url = "wsdjeg/music-player.nvim",
    version = "1.0.2-1"
  }, {
    name = "my-awesome-plugin.nvim",
    url = "S1M0N38/my-awesome-plugin.nvim",
    version = "0.1.1-1"
  }, {
    name = "navigator.nvim",
    url = "numToStr/Navigator.nvim",
    version = "0.6-1"
  }, {
    name = "neo-tree.nvim",
    url = "nvim-neo-tree/neo-tree.nvim",
    version = "3.38.0-1"
  }, {
    name = "neoconf.nvim",
    url = "folke/neoconf.nvim",
    version = "1.4.0-1"
  }, {
    name = "neodev.nvim",
    url = "folke/neodev.nvim",
    version = "3.0.0-1"
  }, {
    name = "neogen",
    url = "danymat/neogen",
    version = "2.20.0-1"
  }, {
    name = "neogit",
    url = "NeogitOrg/neogit",
    version = "3.0.0-1"
  }, {
    name = "neorg",
    url = "nvim-neorg/neorg",
    version = "9.3.0-1"
  }, {
    name = "neorg-archive",
    url = "bottd/neorg-archive",
    version = "1.1.0-1"
  }, {
    name = "neorg-conceal-wrap",
    url = "benlubas/neorg-conceal-wrap",
    version = "1.0.1-1"
  }, {
    name = "neorg-interim-ls",
    url = "benlubas/neorg-interim-ls",
    version = "2.1.1-1"
  }, {
    name = "neorg-query",
    url = "benlubas/neorg-query",
    version = "1.4.0-1"
  }, {
    name = "neorg-se",
    url = "benlubas/neorg-se",
    version = "1.1.10-1"
  }, {
    name = "neorg-telescope",
    url = "nvim-neorg/neorg-telescope",
    version = "1.2.2-1"
  }, {
    name = "neorg-worklog",
    url = "bottd/neorg-worklog",
    version = "1.3.4-1"
  }, {
    name = "neoscroll.nvim",
    url = "karb94/neoscroll.nvim",
    version = "0.2.0-1"
  }, {
    name = "neotest",
    url = "nvim-neotest/neotest",
    version = "5.13.4-1"
  }, {
    name = "neotest-bun",
    url = "jutonz/neotest-bun",
    version = "0.1.2-1"
  }, {
    name = "neotest-busted",
    url = "MisanthropicBit/neotest-busted",
    version = "1.3.1-1"
  }, {
    name = "neotest-dotnet",
    url = "Issafalcon/neotest-dotnet",
    version = "stable-1"
  }, {
    name = "neotest-golang",
    url = "fredrikaverpil/neotest-golang",
    version = "2.6.0-1"
  }, {
    name = "neotest-haskell",
    url = "mrcjkb/neotest-haskell",
    version = "3.0.1-1"
  }, {
    name = "neotest-java",
    url = "rcasia/neotest-java",
    version = "0.22.6-1"
  }, {
    name = "neotest-kotlin",
    url = "codymikol/neotest-kotlin",
    version = "1.0.0-1"
  }, {
    name = "neotest-vstest",
    url = "Nsidorenco/neotest-vstest",
    version = "0.7.2-1"
  }, {
    name = "neotest-zig",
    url = "lawrence-laz/neotest-zig",
    version = "1.4.0-1"
  }, {
    name = "nerdy.nvim",
    url = "2KAbhishek/nerdy.nvim",
    version = "1.4-1"
  }, {
    name = "netman.nvim",
    url = "miversen33/netman.nvim",
    version = "1.15-1"
  }, {
    name = "nightfox.nvim",
    url = "EdenEast/nightfox.nvim",
    version = "3.10.0-1"
  }, {
    name = "no-neck-pain.nvim",
    url = "shortcuts/no-neck-pain.nvim",
    version = "2.5.2-1"
  }, {
    name = "noice.nvim",
    url = "folke/noice.nvim",
    version = "4.10.0-1"
  }, {
    name = "notes.nvim",
    url = "1321tremblay/notes.nvim",
    version = "0.1.0-1"
  }, {
    name = "notify.nvim",
    url = "wsdjeg/notify.nvim",
    version = "2.2.0-1"
  }, {
    name = "npackages.nvim",
    url = "diegofigs/npackages.nvim",
    version = "0.3.0-1"
  }, {
    name = "nui-components.nvim",
    url = "grapp-dev/nui-components.nvim",
    version = "1.5.3-1"
  }, {
    name = "nui.nvim",
    url = "MunifTanjim/nui.nvim",
    version = "0.4.0-1"
  }, {
    name = "nvim-a2-pack",
    url = "dfgordon/nvim-a2-pack",
    version = "1.0.0-1"
  }, {
    name = "nvim-autopairs",
    url = "windwp/nvim-autopairs",
    version = "0.10.0-1"
  }, {
    name = "nvim-best-practices-plugin-template",
    url = "ColinKennedy/nvim-best-practices-plugin-template",
    version = "1.11.0-1"
  }, {
    name = "nvim-bqf",
    url = "kevinhwang91/nvim-bqf",
    version = "1.1.1-1"
  }, {
    name = "nvim-client",
    url = "neovim/lua-client",
    version = "0.2.4-1"
  }, {
    name = "nvim-client-proxy",
    url = "hjdivad/nvim-client-proxy",
    version = "0.1.0-1"
  }, {
    name = "nvim-cokeline",
    url = "willothy/nvim-cokeline",
    version = "0.4.0-1"
  }, {
    name = "nvim-dap",
    url = "mfussenegger/nvim-dap",
    version = "0.10.0-1"
  }, {
    name = "nvim-dap-envfile",
    url = "ravsii/nvim-dap-envfile",
    version = "0.2.0-1"
  }, {
    name = "nvim-dap-ui",
    url = "rcarriga/nvim-dap-ui",
    version = "4.0.0-1"
  }, {
    name = "nvim-dev-container",
    url = "esensar/nvim-dev-container",
    version = "0.2.0-1"
  }, {
    name = "nvim-faker",
    url = "git+ssh://git@github.com/tehdb/nvim-faker.git",
    version = "1.0.0-1"
  }, {
    name = "nvim-java",
    url = "nvim-java/nvim-java",
    version = "1.0.0-1"
  }, {
    name = "nvim-java-core",
    url = "nvim-java/nvim-java-core",
    version = "1.0.0-1"
  }, {
    name = "nvim-java-dap",
    url = "nvim-java/nvim-java-dap",
    version = "1.0.0-1"
  }, {
    name = "nvim-jdtls",
    url = "mfussenegger/nvim-jdtls",
    version = "0.2.0-1"
  }, {
    name = "nvim-jqx",
    url = "gennaro-tedesco/nvim-jqx",
    version = "0.1.4-1"
  }, {
    name = "nvim-lastplace",
    url = "mrcjkb/nvim-lastplace",
    version = "1.0.0-1"
  }, {
    name = "nvim-lightbulb",
    url = "kosayoda/nvim-lightbulb",
    version = "1.0.0-1"
  }, {
    name = "nvim-lspconfig",
    url = "neovim/nvim-lspconfig",
    version = "2.5.0-1"
  }, {
    name = "nvim-metals",
    url = "scalameta/nvim-metals",
    version = "0.9.x-1"
  }, {
    name = "nvim-mkdocs-material",
    url = "https://codeberg.org/ambaradan/nvim-mkdocs-material/archive/0.1.3.zip",
    version = "0.1.3-1"
  }, {
    name = "nvim-nio",
    url = "nvim-neotest/nvim-nio",
    version = "1.10.1-1"
  }, {
    name = "nvim-notify",
    url = "rcarriga/nvim-notify",
    version = "3.15.0-1"
  }, {
    name = "nvim-parinfer",
    url = "gpanders/nvim-parinfer",
    version = "1.2.0-1"
  }, {
    name = "nvim-peekup",
    url = "gennaro-tedesco/nvim-peekup",
    version = "0.1.1-1"
  }, {
    name = "nvim-plug",
    url = "wsdjeg/nvim-plug",
    version = "0.6.0-1"
  }, {
    name = "nvim-possession",
    url = "gennaro-tedesco/nvim-possession",
    version = "0.3.1-1"
  }, {
    name = "nvim-scrollview",
    url = "dstein64/nvim-scrollview",
    version = "6.2.2-1"
  }, {
    name = "nvim-smuggler",
    url = "Klafyvel/nvim-smuggler",
    version = "0.5.0-1"
  }, {
    name = "nvim-snippets",
    url = "garymjr/nvim-snippets",
    version = "1.0.0-1"
  }, {
    name = "nvim-snippy",
    url = "dcampos/nvim-snippy",
    version = "1.0.0-1"
  }, {
    name = "nvim-surround",
    url = "kylechui/nvim-surround",
    version = "3.1.8-1"
  }, {
    name = "nvim-telescope-cycler",
    url = "heindsight/nvim-telescope-cycler",
    version = "0.1.0-1"
  }, {
    name = "nvim-textmate",
    url = "icedman/nvim-textmate",
    version = "0.0.1-1"
  }, {
    name = "nvim-thyme",
    url = "aileot/nvim-thyme",
    version = "1.6.1-1"
  }, {
    name = "nvim-tree.lua",
    url = "nvim-tree/nvim-tree.lua",
    version = "1.6.0-1"
  }, {
    name = "nvim-treesitter-context",
    url = "nvim-treesitter/nvim-treesitter-context",
    version = "1.0.0-1"
  }, {
    name = "nvim-treesitter-legacy-api",
    url = "nvim-treesitter/nvim-treesitter",
    version = "0.9.2-1"
  }, {
    name = "nvim-ufo",
    url = "kevinhwang91/nvim-ufo",
    version = "1.5.0-1"
  }, {
    name = "nvim-web-devicons",
    url = "nvim-tree/nvim-web-devicons",
    version = "0.100-1"
  }, {
    name = "nvim-window-picker",
    url = "s1n7ax/nvim-window-picker",
    version = "2.4.0-1"
  }, {
    name = "obazel.nvim",
    url = "glindstedt/obazel.nvim",
    version = "0.2.0-1"
  }, {
    name = "obsidian.nvim",
    url = "obsidian-nvim/obsidian.nvim",
    version = "3.14.7-1"
  }, {
    name = "oil.nvim",
    url = "stevearc/oil.nvim",
    version = "2.15.0-1"
  }, {
    name = "onedark.nvim",
    url = "navarasu/onedark.nvim",
    version = "1.0.3-1"
  }, {
    name = "onedarkpro.nvim",
    url = "olimorris/onedarkpro.nvim",
    version = "2.25.0-1"
  }, {
    name = "onenord.nvim",
    url = "rmehri01/onenord.nvim",
    version = "0.7.0-1"
  }, {
    name = "oops.nvim",
    url = "OXY2DEV/oops.nvim",
    version = "1.0.0-1"
  }, {
    name = "otter.nvim",
    url = "jmbuhr/otter.nvim",
    version = "2.13.4-1"
  }, {
    name = "overseer.nvim",
    url = "stevearc/overseer.nvim",
    version = "2.0.0-1"
  }, {
    name = "oz.nvim",
    url = "luxluth/oz.nvim",
    version = "0.0.4-1"
  }, {
    name = "package-info.nvim",
    url = "vuki656/package-info.nvim",
    version = "2.0-1"
  }, {
    name = "paperplanes.nvim",
    url = "rktjmp/paperplanes.nvim",
    version = "1.0.3-1"
  }, {
    name = "papis.nvim",
    url = "jghauser/papis.nvim",
    version = "0.9.1-1"
  }, {
    name = "paq-nvim",
    url = "savq/paq-nvim",
    version = "2.0.0-1"
  }, {
    name = "pathlib.nvim",
    url = "pysan3/pathlib.nvim",
    version = "2.2.3-1"
  }, {
    name = "patterns.nvim",
    url = "OXY2DEV/patterns.nvim",
    version = "2.1.1-1"
  }, {
    name = "persisted.nvim",
    url = "olimorris/persisted.nvim",
    version = "2.1.1-1"
  }, {
    name = "persistence.nvim",
    url = "folke/persistence.nvim",
    version = "3.1.0-1"
  }, {
    name = "picker.nvim",
    url = "wsdjeg/picker.nvim",
    version = "1.6.0-1"
  }, {
    name = "plenary.nvim",
    url = "nvim-lua/plenary.nvim",
    version = "0.1.4-1"
  }, {
    name = "pmd3.nvim",
    url = "https://codeberg.org/leso-kn/pmd3.nvim/archive/v0.1.1.zip",
    version = "0.1.1-1"
  }, {
    name = "presenterm.nvim",
    url = "Piotr1215/presenterm.nvim",
    version = "1.5.0-1"
  }, {
    name = "pretty-fold.nvim",
    url = "anuvyklack/pretty-fold.nvim",
    version = "3.0-1"
  }, {
    name = "processing.nvim",
    url = "sophieforrest/processing.nvim",
    version = "1.1.1-1"
  }, {
    name = "project.nvim",
    url = "DrKJeff16/project.nvim",
    version = "0.1.12-1"
  }, {
    name = "quarry.nvim",
    url = "rudionrails/quarry.nvim",
    version = "4.0.0-1"
  }, {
    name = "quick-todo.nvim",
    url = "SyedAsimShah1/quick-todo.nvim",
    version = "0.1.1-1"
  }, {
    name = "quicker.nvim",
    url = "stevearc/quicker.nvim",
    version = "1.4.0-1"
  }, {
    name = "quickfix.nvim",
    url = "wsdjeg/quickfix.nvim",
    version = "1.0.0-1"
  }, {
    name = "rainbow-delimiters.nvim",
    url = "HiPhish/rainbow-delimiters.nvim",
    version = "0.10.0-1"
  }, {
    name = "record-key.nvim",
    url = "wsdjeg/record-key.nvim",
    version = "1.4.0-1"
  }, {
    name = "record-screen.nvim",
    url = "wsdjeg/record-screen.nvim",
    version = "1.2.0-1"
  }, {
    name = "remember.nvim",
    url = "vladdoster/remember.nvim",
    version = "1.4.1-1"
  }, {
    name = "renamer.nvim",
    url = "filipdutescu/renamer.nvim",
    version = "5.1.0-1"
  }, {
    name = "render-markdown.nvim",
    url = "MeanderingProgrammer/render-markdown.nvim",
    version = "8.10.0-1"
  }, {
    name = "repl.nvim",
    url = "wsdjeg/repl.nvim",
    version = "1.0.0-1"
  }, {
    name = "rest.nvim",
    url = "rest-nvim/rest.nvim",
    version = "3.13.0-1"
  }, {
    name = "rikai.nvim",
    url = "teto/rikai.nvim",
    version = "0.0.1-1"
  }, {
    name = "rime.nvim",
    url = "rimeinn/rime.nvim",
    version = "0.2.14-1"
  }, {
    name = "rocks-config.nvim",
    url = "nvim-neorocks/rocks-config.nvim",
    version = "3.1.2-1"
  }, {
    name = "rocks-dev.nvim",
    url = "nvim-neorocks/rocks-dev.nvim",
    version = "1.8.1-1"
  }, {
    name = "rocks-git.nvim",
    url = "lumen-oss/rocks-git.nvim",
    version = "2.5.7-1"
  }, {
    name = "rocks-lazy.nvim",
    url = "nvim-neorocks/rocks-lazy.nvim",
    version = "1.2.2-1"
  }, {
    name = "rocks-treesitter.nvim",
    url = "nvim-neorocks/rocks-treesitter.nvim",
    version = "1.3.1-1"
  }, {
    name = "rocks.nvim",
    url = "lumen-oss/rocks.nvim",
    version = "2.46.1-1"
  }, {
    name = "rooter.nvim",
    url = "wsdjeg/rooter.nvim",
    version = "1.3.0-1"
  }, {
    name = "rtp.nvim",
    url = "nvim-neorocks/rtp.nvim",
    version = "1.2.0-1"
  }, {
    name = "runt.nvim",
    url = "Julian/runt.nvim",
    version = "2024.10.2-1"
  }, {
    name = "rustaceanvim",
    url = "mrcjkb/rustaceanvim",
    version = "7.0.6-2"
  }, {
    name = "schemastore.nvim",
    url = "b0o/SchemaStore.nvim",
    version = "0.2.0-1"
  }, {
    name = "scratch.nvim",
    url = "wsdjeg/scratch.nvim",
    version = "0.2.0-1"
  }, {
    name = "screenkey.nvim",
    url = "NStefan002/screenkey.nvim",
    version = "2.4.2-1"
  }, {
    name = "scrollbar.nvim",
    url = "Xuyuanp/scrollbar.nvim",
    version = "0.4.0-1"
  }, {
    name = "sense.nvim",
    url = "boltlessengineer/sense.nvim",
    version = "1.0.1-1"
  }, {
    name = "session.nvim",
    url = "Kibadda/session.nvim",
    version = "3.1.0-1"
  }, {
    name = "sf.nvim",
    url = "xixiaofinland/sf.nvim",
    version = "1.16.1-1"
  }, {
    name = "sg.nvim",
    url = "sourcegraph/sg.nvim",
    version = "1.1.0-1"
  }, {
    name = "smart-ime.nvim",
    url = "wsdjeg/smart-ime.nvim",
    version = "1.0.0-1"
  }, {
    name = "smart-splits.nvim",
    url = "mrjones2014/smart-splits.nvim",
    version = "2.0.5-1"
  }, {
    name = "snacks.nvim",
    url = "folke/snacks.nvim",
    version = "2.30.0-1"
  }, {
    name = "sos.nvim",
    url = "tmillr/sos.nvim",
    version = "1.0.0-1"
  }, {
    name = "squirrel.nvim",
    url = "xiaoshihou514/squirrel.nvim",
    version = "1.0.0-1"
  }, {
    name = "starter.nvim",
    url = "Kibadda/starter.nvim",
    version = "1.3.0-1"
  }, {
    name = "statusline.nvim",
    url = "wsdjeg/statusline.nvim",
    version = "1.0.0-1"
  }, {
    name = "storm-mode.nvim",
    url = "HoppenR/storm-mode.nvim",
    version = "1.2.0-1"
  }, {
    name = "string-natcmp",
    url = "mah0x211/lua-string-natcmp",
    version = "0.1.0-1"
  }, {
    name = "structlog.nvim",
    url = "git+ssh://git@github.com/Tastyep/structlog.nvim.git",
    version = "0.1-1"
  }, {
    name = "substitute.nvim",
    url = "gbprod/substitute.nvim",
    version = "2.0.0-1"
  }, {
    name = "sus.nvim",
    url = "TarunDaCoder/sus.nvim",
    version = "1.0.0-1"
  }, {
    name = "sweetie.nvim",
    url = "NTBBloodbath/sweetie.nvim",
    version = "3.2.0-1"
  }, {
    name = "tabby.nvim",
    url = "nanozuki/tabby.nvim",
    version = "2.8.0-1"
  }, {
    name = "tabline.nvim",
    url = "wsdjeg/tabline.nvim",
    version = "1.2.0-1"
  }, {
    name = "tangerine.nvim",
    url = "udayvir-singh/tangerine.nvim",
    version = "2.9-1"
  }, {
    name = "tasks.nvim",
    url = "wsdjeg/tasks.nvim",
    version = "2.0.1-1"
  }, {
    name = "teacup.neovim",
    url = "Clivern/teacup.neovim",
    version = "0.0.1-1"
  }, {
    name = "telescope-cmdline.nvim",
    url = "jonarrien/telescope-cmdline.nvim",
    version = "0.2.3-1"
  }, {
    name = "telescope-frecency.nvim",
    url = "nvim-telescope/telescope-frecency.nvim",
    version = "1.2.2-1"
  }, {
    name = "telescope-zf-native.nvim",
    url = "natecraddock/telescope-zf-native.nvim",
    version = "1.0.0-1"
  }, {
    name = "telescope.nvim",
    url = "nvim-telescope/telescope.nvim",
    version = "0.2.0-1"
  }, {
    name = "tellenc.nvim",
    url = "Freed-Wu/tellenc.nvim",
    version = "1.22-1"
  }, {
    name = "terminal.nvim",
    url = "wsdjeg/terminal.nvim",
    version = "1.1.0-1"
  }, {
    name = "todo-comments.nvim",
    url = "folke/todo-comments.nvim",
    version = "1.5.0-1"
  }, {
    name = "todo.nvim",
    url = "wsdjeg/todo.nvim",
    version = "1.0.0-1"
  }, {
    name = "toggleterm.nvim",
    url = "akinsho/toggleterm.nvim",
    version = "2.13.1-1"
  }, {
    name = "tokyonight.nvim",
    url = "folke/tokyonight.nvim",
    version = "4.14.1-1"
  }, {
    name = "toml.nvim",
    url = "wsdjeg/toml.nvim",
    version = "1.1.0-1"
  }, {
    name = "tree-sitter-ada",
    url = "briot/tree-sitter-ada",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-agda",
    url = "tree-sitter/tree-sitter-agda",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-angular",
    url = "dlvandenberg/tree-sitter-angular",
    version = "0.0.47-1"
  }, {
    name = "tree-sitter-apex",
    url = "aheber/tree-sitter-sfapex",
    version = "0.0.48-1"
  }, {
    name = "tree-sitter-arduino",
    url = "tree-sitter-grammars/tree-sitter-arduino",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-asm",
    url = "RubixDev/tree-sitter-asm",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-astro",
    url = "virchau13/tree-sitter-astro",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-authzed",
    url = "mleonidas/tree-sitter-authzed",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-awk",
    url = "Beaglefoot/tree-sitter-awk",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-bash",
    url = "tree-sitter/tree-sitter-bash",
    version = "0.0.49-1"
  }, {
    name = "tree-sitter-bass",
    url = "vito/tree-sitter-bass",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-beancount",
    url = "polarmutex/tree-sitter-beancount",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-bibtex",
    url = "latex-lsp/tree-sitter-bibtex",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-bicep",
    url = "tree-sitter-grammars/tree-sitter-bicep",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-bitbake",
    url = "tree-sitter-grammars/tree-sitter-bitbake",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-blade",
    url = "EmranMR/tree-sitter-blade",
    version = "0.0.8-1"
  }, {
    name = "tree-sitter-blueprint",
    url = "https://gitlab.com/gabmus/tree-sitter-blueprint/-/archive/355ef84ef8a958ac822117b652cf4d49bac16c79.zip",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-bp",
    url = "ambroisie/tree-sitter-bp",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-brightscript",
    url = "ajdelcimmuto/tree-sitter-brightscript",
    version = "0.0.3-1"
  }, {
    name = "tree-sitter-c",
    url = "tree-sitter/tree-sitter-c",
    version = "0.0.47-1"
  }, {
    name = "tree-sitter-c3",
    url = "c3lang/tree-sitter-c3",
    version = "0.0.8-1"
  }, {
    name = "tree-sitter-c_sharp",
    url = "tree-sitter/tree-sitter-c-sharp",
    version = "0.0.47-1"
  }, {
    name = "tree-sitter-caddy",
    url = "opa-oz/tree-sitter-caddy",
    version = "0.0.2-1"
  }, {
    name = "tree-sitter-cairo",
    url = "tree-sitter-grammars/tree-sitter-cairo",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-capnp",
    url = "tree-sitter-grammars/tree-sitter-capnp",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-chatito",
    url = "tree-sitter-grammars/tree-sitter-chatito",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-circom",
    url = "Decurity/tree-sitter-circom",
    version = "0.0.2-1"
  }, {
    name = "tree-sitter-cli",
    url = "FourierTransformer/tree-sitter-cli",
    version = "0.25.3-1"
  }, {
    name = "tree-sitter-clojure",
    url = "sogaiu/tree-sitter-clojure",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-cmake",
    url = "uyha/tree-sitter-cmake",
    version = "0.0.40-1"
  }, {
    name = "tree-sitter-comment",
    url = "stsewd/tree-sitter-comment",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-commonlisp",
    url = "tree-sitter-grammars/tree-sitter-commonlisp",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-cooklang",
    url = "addcninblue/tree-sitter-cooklang",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-corn",
    url = "jakestanger/tree-sitter-corn",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-cpon",
    url = "tree-sitter-grammars/tree-sitter-cpon",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-cpp",
    url = "tree-sitter/tree-sitter-cpp",
    version = "0.0.49-1"
  }, {
    name = "tree-sitter-css",
    url = "tree-sitter/tree-sitter-css",
    version = "0.0.39-1"
  }, {
    name = "tree-sitter-csv",
    url = "tree-sitter-grammars/tree-sitter-csv",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-cuda",
    url = "tree-sitter-grammars/tree-sitter-cuda",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-cue",
    url = "eonpatapon/tree-sitter-cue",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-cylc",
    url = "elliotfontaine/tree-sitter-cylc",
    version = "0.0.5-1"
  }, {
    name = "tree-sitter-d",
    url = "gdamore/tree-sitter-d",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-dart",
    url = "UserNobody14/tree-sitter-dart",
    version = "0.0.37-1"
  }, {
    name = "tree-sitter-desktop",
    url = "ValdezFOmar/tree-sitter-desktop",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-devicetree",
    url = "joelspadin/tree-sitter-devicetree",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-dhall",
    url = "jbellerb/tree-sitter-dhall",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-diff",
    url = "tree-sitter-grammars/tree-sitter-diff",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-disassembly",
    url = "ColinKennedy/tree-sitter-disassembly",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-djot",
    url = "treeman/tree-sitter-djot",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-dockerfile",
    url = "camdencheek/tree-sitter-dockerfile",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-dot",
    url = "rydesun/tree-sitter-dot",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-doxygen",
    url = "tree-sitter-grammars/tree-sitter-doxygen",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-dtd",
    url = "tree-sitter-grammars/tree-sitter-xml",
    version = "0.0.40-1"
  }, {
    name = "tree-sitter-earthfile",
    url = "glehmann/tree-sitter-earthfile",
    version = "0.0.40-1"
  }, {
    name = "tree-sitter-ebnf",
    url = "RubixDev/ebnf",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-ecma",
    url = "nvim-neorocks/luarocks-stub",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-editorconfig",
    url = "ValdezFOmar/tree-sitter-editorconfig",
    version = "0.0.61-1"
  }, {
    name = "tree-sitter-eds",
    url = "uyha/tree-sitter-eds",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-eex",
    url = "connorlay/tree-sitter-eex",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-elixir",
    url = "elixir-lang/tree-sitter-elixir",
    version = "0.0.43-1"
  }, {
    name = "tree-sitter-elm",
    url = "elm-tooling/tree-sitter-elm",
    version = "0.0.37-1"
  }, {
    name = "tree-sitter-elsa",
    url = "glapa-grossklag/tree-sitter-elsa",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-elvish",
    url = "elves/tree-sitter-elvish",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-embedded_template",
    url = "tree-sitter/tree-sitter-embedded-template",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-enforce",
    url = "simonvic/tree-sitter-enforce",
    version = "0.0.12-1"
  }, {
    name = "tree-sitter-erlang",
    url = "WhatsApp/tree-sitter-erlang",
    version = "0.0.48-1"
  }, {
    name = "tree-sitter-facility",
    url = "FacilityApi/tree-sitter-facility",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-faust",
    url = "khiner/tree-sitter-faust",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-fennel",
    url = "alexmozaidze/tree-sitter-fennel",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-fidl",
    url = "google/tree-sitter-fidl",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-firrtl",
    url = "tree-sitter-grammars/tree-sitter-firrtl",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-fish",
    url = "ram02z/tree-sitter-fish",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-foam",
    url = "FoamScience/tree-sitter-foam",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-forth",
    url = "AlexanderBrevig/tree-sitter-forth",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-fortran",
    url = "stadelmanma/tree-sitter-fortran",
    version = "0.0.53-1"
  }, {
    name = "tree-sitter-fsh",
    url = "mgramigna/tree-sitter-fsh",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-fsharp",
    url = "ionide/tree-sitter-fsharp",
    version = "0.0.17-1"
  }, {
    name = "tree-sitter-func",
    url = "tree-sitter-grammars/tree-sitter-func",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-fusion",
    url = "https://gitlab.com/jirgn/tree-sitter-fusion/-/archive/19db2f47ba4c3a0f6238d4ae0e2abfca16e61dd6.zip",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-gap",
    url = "gap-system/tree-sitter-gap",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-gaptst",
    url = "gap-system/tree-sitter-gaptst",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-gdscript",
    url = "PrestonKnopp/tree-sitter-gdscript",
    version = "0.0.46-1"
  }, {
    name = "tree-sitter-gdshader",
    url = "airblast-dev/tree-sitter-gdshader",
    version = "0.0.38-1"
  }, {
    name = "tree-sitter-git_config",
    url = "the-mikedavis/tree-sitter-git-config",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-git_rebase",
    url = "the-mikedavis/tree-sitter-git-rebase",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-gitattributes",
    url = "tree-sitter-grammars/tree-sitter-gitattributes",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-gitcommit",
    url = "gbprod/tree-sitter-gitcommit",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-gitignore",
    url = "shunsambongi/tree-sitter-gitignore",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-gleam",
    url = "gleam-lang/tree-sitter-gleam",
    version = "0.0.49-1"
  }, {
    name = "tree-sitter-glimmer",
    url = "ember-tooling/tree-sitter-glimmer",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-glimmer_javascript",
    url = "NullVoxPopuli/tree-sitter-glimmer-javascript",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-glimmer_typescript",
    url = "NullVoxPopuli/tree-sitter-glimmer-typescript",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-glsl",
    url = "tree-sitter-grammars/tree-sitter-glsl",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-gn",
    url = "tree-sitter-grammars/tree-sitter-gn",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-gnuplot",
    url = "dpezto/tree-sitter-gnuplot",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-go",
    url = "tree-sitter/tree-sitter-go",
    version = "0.0.43-1"
  }, {
    name = "tree-sitter-goctl",
    url = "chaozwn/tree-sitter-goctl",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-godot_resource",
    url = "PrestonKnopp/tree-sitter-godot-resource",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-gomod",
    url = "camdencheek/tree-sitter-go-mod",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-gosum",
    url = "tree-sitter-grammars/tree-sitter-go-sum",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-gotmpl",
    url = "ngalaiko/tree-sitter-go-template",
    version = "0.0.41-1"
  }, {
    name = "tree-sitter-gowork",
    url = "omertuc/tree-sitter-go-work",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-gpg",
    url = "tree-sitter-grammars/tree-sitter-gpg-config",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-graphql",
    url = "bkegley/tree-sitter-graphql",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-gren",
    url = "MaeBrooks/tree-sitter-gren",
    version = "0.0.7-1"
  }, {
    name = "tree-sitter-groovy",
    url = "murtaza64/tree-sitter-groovy",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-groq",
    url = "ajrussellaudio/tree-sitter-groq",
    version = "0.0.3-1"
  }, {
    name = "tree-sitter-gstlaunch",
    url = "tree-sitter-grammars/tree-sitter-gstlaunch",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-hack",
    url = "slackhq/tree-sitter-hack",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-hare",
    url = "tree-sitter-grammars/tree-sitter-hare",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-haskell",
    url = "tree-sitter-grammars/tree-sitter-haskell",
    version = "0.0.38-1"
  }, {
    name = "tree-sitter-haskell_persistent",
    url = "MercuryTechnologies/tree-sitter-haskell-persistent",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-hcl",
    url = "tree-sitter-grammars/tree-sitter-hcl",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-heex",
    url = "connorlay/tree-sitter-heex",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-helm",
    url = "ngalaiko/tree-sitter-go-template",
    version = "0.0.40-1"
  }, {
    name = "tree-sitter-hjson",
    url = "winston0410/tree-sitter-hjson",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-hlsl",
    url = "tree-sitter-grammars/tree-sitter-hlsl",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-hlsplaylist",
    url = "Freed-Wu/tree-sitter-hlsplaylist",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-hocon",
    url = "antosha417/tree-sitter-hocon",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-hoon",
    url = "urbit-pilled/tree-sitter-hoon",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-html",
    url = "tree-sitter/tree-sitter-html",
    version = "0.0.40-1"
  }, {
    name = "tree-sitter-html_tags",
    url = "nvim-neorocks/luarocks-stub",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-htmldjango",
    url = "interdependence/tree-sitter-htmldjango",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-http",
    url = "rest-nvim/tree-sitter-http",
    version = "0.0.37-1"
  }, {
    name = "tree-sitter-hurl",
    url = "pfeiferj/tree-sitter-hurl",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-hyprlang",
    url = "tree-sitter-grammars/tree-sitter-hyprlang",
    version = "0.0.40-1"
  }, {
    name = "tree-sitter-idl",
    url = "cathaysia/tree-sitter-idl",
    version = "0.0.42-1"
  }, {
    name = "tree-sitter-idris",
    url = "kayhide/tree-sitter-idris",
    version = "0.0.1-1"
  }, {
    name = "tree-sitter-ini",
    url = "justinmk/tree-sitter-ini",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-inko",
    url = "inko-lang/tree-sitter-inko",
    version = "0.0.52-1"
  }, {
    name = "tree-sitter-ipkg",
    url = "srghma/tree-sitter-ipkg",
    version = "0.0.1-1"
  }, {
    name = "tree-sitter-ispc",
    url = "tree-sitter-grammars/tree-sitter-ispc",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-janet_simple",
    url = "sogaiu/tree-sitter-janet-simple",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-java",
    url = "tree-sitter/tree-sitter-java",
    version = "0.0.46-1"
  }, {
    name = "tree-sitter-javadoc",
    url = "rmuir/tree-sitter-javadoc",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-javascript",
    url = "tree-sitter/tree-sitter-javascript",
    version = "0.0.41-1"
  }, {
    name = "tree-sitter-jinja",
    url = "cathaysia/tree-sitter-jinja",
    version = "0.0.10-1"
  }, {
    name = "tree-sitter-jinja_inline",
    url = "cathaysia/tree-sitter-jinja",
    version = "0.0.14-1"
  }, {
    name = "tree-sitter-jq",
    url = "flurie/tree-sitter-jq",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-jsdoc",
    url = "tree-sitter/tree-sitter-jsdoc",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-json",
    url = "tree-sitter/tree-sitter-json",
    version = "0.0.40-1"
  }, {
    name = "tree-sitter-json5",
    url = "Joakker/tree-sitter-json5",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-jsonc",
    url = "https://gitlab.com/WhyNotHugo/tree-sitter-jsonc/-/archive/02b01653c8a1c198ae7287d566efa86a135b30d5.zip",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-jsonnet",
    url = "sourcegraph/tree-sitter-jsonnet",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-jsx",
    url = "nvim-neorocks/luarocks-stub",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-julia",
    url = "tree-sitter-grammars/tree-sitter-julia",
    version = "0.0.49-1"
  }, {
    name = "tree-sitter-just",
    url = "IndianBoy42/tree-sitter-just",
    version = "0.0.37-1"
  }, {
    name = "tree-sitter-kcl",
    url = "kcl-lang/tree-sitter-kcl",
    version = "0.0.2-1"
  }, {
    name = "tree-sitter-kconfig",
    url = "tree-sitter-grammars/tree-sitter-kconfig",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-kdl",
    url = "tree-sitter-grammars/tree-sitter-kdl",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-kitty",
    url = "OXY2DEV/tree-sitter-kitty",
    version = "0.0.5-1"
  }, {
    name = "tree-sitter-kotlin",
    url = "fwcd/tree-sitter-kotlin",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-koto",
    url = "koto-lang/tree-sitter-koto",
    version = "0.0.51-1"
  }, {
    name = "tree-sitter-kusto",
    url = "Willem-J-an/tree-sitter-kusto",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-lalrpop",
    url = "traxys/tree-sitter-lalrpop",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-latex",
    url = "latex-lsp/tree-sitter-latex",
    version = "0.0.41-1"
  }, {
    name = "tree-sitter-ledger",
    url = "cbarrete/tree-sitter-ledger",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-leo",
    url = "r001/tree-sitter-leo",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-linkerscript",
    url = "tree-sitter-grammars/tree-sitter-linkerscript",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-liquid",
    url = "hankthetank27/tree-sitter-liquid",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-liquidsoap",
    url = "savonet/tree-sitter-liquidsoap",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-llvm",
    url = "benwilliamgraham/tree-sitter-llvm",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-lua",
    url = "tree-sitter-grammars/tree-sitter-lua",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-luadoc",
    url = "tree-sitter-grammars/tree-sitter-luadoc",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-luap",
    url = "tree-sitter-grammars/tree-sitter-luap",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-luau",
    url = "tree-sitter-grammars/tree-sitter-luau",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-m68k",
    url = "grahambates/tree-sitter-m68k",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-make",
    url = "alemuller/tree-sitter-make",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-markdown",
    url = "tree-sitter-grammars/tree-sitter-markdown",
    version = "0.0.45-1"
  }, {
    name = "tree-sitter-markdown_inline",
    url = "tree-sitter-grammars/tree-sitter-markdown",
    version = "0.0.43-1"
  }, {
    name = "tree-sitter-matlab",
    url = "acristoffers/tree-sitter-matlab",
    version = "0.0.51-1"
  }, {
    name = "tree-sitter-menhir",
    url = "Kerl13/tree-sitter-menhir",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-mermaid",
    url = "monaqa/tree-sitter-mermaid",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-meson",
    url = "tree-sitter-grammars/tree-sitter-meson",
    version = "0.0.40-1"
  }, {
    name = "tree-sitter-mlir",
    url = "artagnon/tree-sitter-mlir",
    version = "0.0.83-1"
  }, {
    name = "tree-sitter-muttrc",
    url = "neomutt/tree-sitter-muttrc",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-nasm",
    url = "naclsn/tree-sitter-nasm",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-nginx",
    url = "opa-oz/tree-sitter-nginx",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-nickel",
    url = "nickel-lang/tree-sitter-nickel",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-nim",
    url = "alaviss/tree-sitter-nim",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-nim_format_string",
    url = "aMOPel/tree-sitter-nim-format-string",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-ninja",
    url = "alemuller/tree-sitter-ninja",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-nix",
    url = "nix-community/tree-sitter-nix",
    version = "0.0.67-1"
  }, {
    name = "tree-sitter-norg",
    url = "nvim-neorg/tree-sitter-norg",
    version = "0.2.6-1"
  }, {
    name = "tree-sitter-norg-meta",
    url = "nvim-neorg/tree-sitter-norg-meta",
    version = "0.1.0-1"
  }, {
    name = "tree-sitter-nqc",
    url = "tree-sitter-grammars/tree-sitter-nqc",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-nu",
    url = "nushell/tree-sitter-nu",
    version = "0.0.60-1"
  }, {
    name = "tree-sitter-objc",
    url = "tree-sitter-grammars/tree-sitter-objc",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-objdump",
    url = "ColinKennedy/tree-sitter-objdump",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-ocaml",
    url = "tree-sitter/tree-sitter-ocaml",
    version = "0.0.46-1"
  }, {
    name = "tree-sitter-ocaml_interface",
    url = "tree-sitter/tree-sitter-ocaml",
    version = "0.0.47-1"
  }, {
    name = "tree-sitter-ocamllex",
    url = "atom-ocaml/tree-sitter-ocamllex",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-odin",
    url = "tree-sitter-grammars/tree-sitter-odin",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-org",
    url = "milisims/tree-sitter-org",
    version = "0.0.1-1"
  }, {
    name = "tree-sitter-orgmode",
    url = "nvim-orgmode/tree-sitter-org",
    version = "2.0.2-1"
  }, {
    name = "tree-sitter-pascal",
    url = "Isopod/tree-sitter-pascal",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-passwd",
    url = "ath3/tree-sitter-passwd",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-pem",
    url = "tree-sitter-grammars/tree-sitter-pem",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-perl",
    url = "tree-sitter-perl/tree-sitter-perl",
    version = "0.0.48-1"
  }, {
    name = "tree-sitter-php",
    url = "tree-sitter/tree-sitter-php",
    version = "0.0.51-1"
  }, {
    name = "tree-sitter-php_only",
    url = "tree-sitter/tree-sitter-php",
    version = "0.0.55-1"
  }, {
    name = "tree-sitter-phpdoc",
    url = "claytonrcarter/tree-sitter-phpdoc",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-pioasm",
    url = "leo60228/tree-sitter-pioasm",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-pkl",
    url = "apple/tree-sitter-pkl",
    version = "0.0.11-1"
  }, {
    name = "tree-sitter-po",
    url = "tree-sitter-grammars/tree-sitter-po",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-pod",
    url = "tree-sitter-perl/tree-sitter-pod",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-poe_filter",
    url = "tree-sitter-grammars/tree-sitter-poe-filter",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-pony",
    url = "tree-sitter-grammars/tree-sitter-pony",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-powershell",
    url = "airbus-cert/tree-sitter-powershell",
    version = "0.0.48-1"
  }, {
    name = "tree-sitter-printf",
    url = "tree-sitter-grammars/tree-sitter-printf",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-prisma",
    url = "victorhqc/tree-sitter-prisma",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-problog",
    url = "foxyseta/tree-sitter-prolog",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-prolog",
    url = "foxyseta/tree-sitter-prolog",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-promql",
    url = "MichaHoffmann/tree-sitter-promql",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-properties",
    url = "tree-sitter-grammars/tree-sitter-properties",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-proto",
    url = "treywood/tree-sitter-proto",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-prql",
    url = "PRQL/tree-sitter-prql",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-psv",
    url = "tree-sitter-grammars/tree-sitter-csv",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-pug",
    url = "zealot128/tree-sitter-pug",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-puppet",
    url = "tree-sitter-grammars/tree-sitter-puppet",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-purescript",
    url = "postsolar/tree-sitter-purescript",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-pymanifest",
    url = "tree-sitter-grammars/tree-sitter-pymanifest",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-python",
    url = "tree-sitter/tree-sitter-python",
    version = "0.0.46-1"
  }, {
    name = "tree-sitter-ql",
    url = "tree-sitter/tree-sitter-ql",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-qmldir",
    url = "tree-sitter-grammars/tree-sitter-qmldir",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-qmljs",
    url = "yuja/tree-sitter-qmljs",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-query",
    url = "tree-sitter-grammars/tree-sitter-query",
    version = "0.0.47-1"
  }, {
    name = "tree-sitter-r",
    url = "r-lib/tree-sitter-r",
    version = "0.0.39-1"
  }, {
    name = "tree-sitter-racket",
    url = "6cdh/tree-sitter-racket",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-ralph",
    url = "alephium/tree-sitter-ralph",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-rasi",
    url = "Fymyte/tree-sitter-rasi",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-razor",
    url = "tris203/tree-sitter-razor",
    version = "0.0.3-1"
  }, {
    name = "tree-sitter-rbs",
    url = "joker1007/tree-sitter-rbs",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-re2c",
    url = "tree-sitter-grammars/tree-sitter-re2c",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-readline",
    url = "tree-sitter-grammars/tree-sitter-readline",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-regex",
    url = "tree-sitter/tree-sitter-regex",
    version = "0.0.41-1"
  }, {
    name = "tree-sitter-rego",
    url = "FallenAngel97/tree-sitter-rego",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-requirements",
    url = "tree-sitter-grammars/tree-sitter-requirements",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-rescript",
    url = "rescript-lang/tree-sitter-rescript",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-rifleconf",
    url = "purarue/tree-sitter-rifleconf",
    version = "0.0.3-1"
  }, {
    name = "tree-sitter-rnoweb",
    url = "bamonroe/tree-sitter-rnoweb",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-robot",
    url = "Hubro/tree-sitter-robot",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-robots",
    url = "opa-oz/tree-sitter-robots-txt",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-roc",
    url = "faldor20/tree-sitter-roc",
    version = "0.0.40-1"
  }, {
    name = "tree-sitter-ron",
    url = "tree-sitter-grammars/tree-sitter-ron",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-rst",
    url = "stsewd/tree-sitter-rst",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-ruby",
    url = "tree-sitter/tree-sitter-ruby",
    version = "0.0.37-1"
  }, {
    name = "tree-sitter-runescript",
    url = "2004Scape/tree-sitter-runescript",
    version = "0.0.1-1"
  }, {
    name = "tree-sitter-rust",
    url = "tree-sitter/tree-sitter-rust",
    version = "0.0.55-1"
  }, {
    name = "tree-sitter-scala",
    url = "tree-sitter/tree-sitter-scala",
    version = "0.0.55-1"
  }, {
    name = "tree-sitter-scfg",
    url = "rockorager/tree-sitter-scfg",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-scheme",
    url = "6cdh/tree-sitter-scheme",
    version = "0.0.38-1"
  }, {
    name = "tree-sitter-scss",
    url = "serenadeai/tree-sitter-scss",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-sflog",
    url = "aheber/tree-sitter-sfapex",
    version = "0.0.44-1"
  }, {
    name = "tree-sitter-slang",
    url = "tree-sitter-grammars/tree-sitter-slang",
    version = "0.0.36-1"
  }, {
    name = "tree-sitter-slim",
    url = "theoo/tree-sitter-slim",
    version = "0.0.7-1"
  }, {
    name = "tree-sitter-slint",
    url = "slint-ui/tree-sitter-slint",
    version = "0.0.44-1"
  }, {
    name = "tree-sitter-smali",
    url = "tree-sitter-grammars/tree-sitter-smali",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-smithy",
    url = "indoorvivants/tree-sitter-smithy",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-snakemake",
    url = "osthomas/tree-sitter-snakemake",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-snl",
    url = "minijackson/tree-sitter-snl",
    version = "0.0.2-1"
  }, {
    name = "tree-sitter-solidity",
    url = "JoranHonig/tree-sitter-solidity",
    version = "0.0.38-1"
  }, {
    name = "tree-sitter-soql",
    url = "aheber/tree-sitter-sfapex",
    version = "0.0.46-1"
  }, {
    name = "tree-sitter-sosl",
    url = "aheber/tree-sitter-sfapex",
    version = "0.0.44-1"
  }, {
    name = "tree-sitter-sourcepawn",
    url = "nilshelmig/tree-sitter-sourcepawn",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-sparql",
    url = "GordianDziwis/tree-sitter-sparql",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-sproto",
    url = "hanxi/tree-sitter-sproto",
    version = "0.0.2-1"
  }, {
    name = "tree-sitter-sql",
    url = "derekstride/tree-sitter-sql",
    version = "0.0.49-1"
  }, {
    name = "tree-sitter-squirrel",
    url = "tree-sitter-grammars/tree-sitter-squirrel",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-ssh_config",
    url = "tree-sitter-grammars/tree-sitter-ssh-config",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-starlark",
    url = "tree-sitter-grammars/tree-sitter-starlark",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-strace",
    url = "sigmaSd/tree-sitter-strace",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-styled",
    url = "mskelton/tree-sitter-styled",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-supercollider",
    url = "madskjeldgaard/tree-sitter-supercollider",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-superhtml",
    url = "kristoff-it/superhtml",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-surface",
    url = "connorlay/tree-sitter-surface",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-svelte",
    url = "tree-sitter-grammars/tree-sitter-svelte",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-sway",
    url = "FuelLabs/tree-sitter-sway",
    version = "0.0.5-1"
  }, {
    name = "tree-sitter-swift",
    url = "alex-pinkus/tree-sitter-swift",
    version = "0.0.59-1"
  }, {
    name = "tree-sitter-sxhkdrc",
    url = "RaafatTurki/tree-sitter-sxhkdrc",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-systemtap",
    url = "ok-ryoko/tree-sitter-systemtap",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-systemverilog",
    url = "gmlarumbe/tree-sitter-systemverilog",
    version = "0.0.45-1"
  }, {
    name = "tree-sitter-t32",
    url = "xasc/tree-sitter-t32",
    version = "0.0.57-1"
  }, {
    name = "tree-sitter-tablegen",
    url = "tree-sitter-grammars/tree-sitter-tablegen",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-tact",
    url = "tact-lang/tree-sitter-tact",
    version = "0.0.38-1"
  }, {
    name = "tree-sitter-tcl",
    url = "tree-sitter-grammars/tree-sitter-tcl",
    version = "0.0.37-1"
  }, {
    name = "tree-sitter-teal",
    url = "euclidianAce/tree-sitter-teal",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-templ",
    url = "vrischmann/tree-sitter-templ",
    version = "0.0.55-1"
  }, {
    name = "tree-sitter-tera",
    url = "uncenter/tree-sitter-tera",
    version = "0.0.8-1"
  }, {
    name = "tree-sitter-terraform",
    url = "MichaHoffmann/tree-sitter-hcl",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-textproto",
    url = "PorterAtGoogle/tree-sitter-textproto",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-thrift",
    url = "tree-sitter-grammars/tree-sitter-thrift",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-tiger",
    url = "ambroisie/tree-sitter-tiger",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-tlaplus",
    url = "tlaplus-community/tree-sitter-tlaplus",
    version = "0.0.38-1"
  }, {
    name = "tree-sitter-tmux",
    url = "Freed-Wu/tree-sitter-tmux",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-todotxt",
    url = "arnarg/tree-sitter-todotxt",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-toml",
    url = "tree-sitter-grammars/tree-sitter-toml",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-tsv",
    url = "tree-sitter-grammars/tree-sitter-csv",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-tsx",
    url = "tree-sitter/tree-sitter-typescript",
    version = "0.0.37-1"
  }, {
    name = "tree-sitter-turtle",
    url = "GordianDziwis/tree-sitter-turtle",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-twig",
    url = "gbprod/tree-sitter-twig",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-typescript",
    url = "tree-sitter/tree-sitter-typescript",
    version = "0.0.38-1"
  }, {
    name = "tree-sitter-typespec",
    url = "happenslol/tree-sitter-typespec",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-typoscript",
    url = "Teddytrombone/tree-sitter-typoscript",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-typst",
    url = "uben0/tree-sitter-typst",
    version = "0.0.37-1"
  }, {
    name = "tree-sitter-udev",
    url = "tree-sitter-grammars/tree-sitter-udev",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-ungrammar",
    url = "tree-sitter-grammars/tree-sitter-ungrammar",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-unison",
    url = "kylegoetz/tree-sitter-unison",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-usd",
    url = "ColinKennedy/tree-sitter-usd",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-uxntal",
    url = "tree-sitter-grammars/tree-sitter-uxntal",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-v",
    url = "vlang/v-analyzer",
    version = "0.0.52-1"
  }, {
    name = "tree-sitter-vala",
    url = "vala-lang/tree-sitter-vala",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-vento",
    url = "ventojs/tree-sitter-vento",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-verilog",
    url = "gmlarumbe/tree-sitter-systemverilog",
    version = "0.0.39-1"
  }, {
    name = "tree-sitter-vhdl",
    url = "jpt13653903/tree-sitter-vhdl",
    version = "0.0.52-1"
  }, {
    name = "tree-sitter-vhs",
    url = "charmbracelet/tree-sitter-vhs",
    version = "0.0.34-1"
  }, {
    name = "tree-sitter-vim",
    url = "tree-sitter-grammars/tree-sitter-vim",
    version = "0.0.37-1"
  }, {
    name = "tree-sitter-vimdoc",
    url = "neovim/tree-sitter-vimdoc",
    version = "0.0.38-1"
  }, {
    name = "tree-sitter-vrl",
    url = "belltoy/tree-sitter-vrl",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-vue",
    url = "tree-sitter-grammars/tree-sitter-vue",
    version = "0.0.33-1"
  }, {
    name = "tree-sitter-wgsl",
    url = "szebniok/tree-sitter-wgsl",
    version = "0.0.31-1"
  }, {
    name = "tree-sitter-wgsl_bevy",
    url = "tree-sitter-grammars/tree-sitter-wgsl-bevy",
    version = "0.0.32-1"
  }, {
    name = "tree-sitter-wing",
    url = "winglang/tree-sitter-wing",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-wit",
    url = "bytecodealliance/tree-sitter-wit",
    version = "0.0.35-1"
  }, {
    name = "tree-sitter-wxml",
    url = "BlockLune/tree-sitter-wxml",
    version = "0.0.2-1"
  }, {
    name = "tree-sitter-xcompose",
    url = "tree-sitter-grammars/tree-sitter-xcompose",
    version = "0.0.30-1"
  }, {
    name = "tree-sitter-xml",
    url = "tree-sitter-grammars/tree-sitter-xml",
    version = "0.0.42-1"
  }, {
    name = "tree-sitter-xresources",
    url = "ValdezFOmar/tree-sitter-xresources",
    version = "0.0.41-1"
  }, {
    name = "tree-sitter-yaml",
    url = "tree-sitter-grammars/tree-sitter-yaml",
    version = "0.0.37-1"
  }, {
    name = "tree-sitter-yang",
    url = "Hubro/tree-sitter-yang",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-ysh",
    url = "danyspin97/tree-sitter-ysh",
    version = "0.0.2-1"
  }, {
    name = "tree-sitter-yuck",
    url = "tree-sitter-grammars/tree-sitter-yuck",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-zathurarc",
    url = "Freed-Wu/tree-sitter-zathurarc",
    version = "0.0.29-1"
  }, {
    name = "tree-sitter-zig",
    url = "tree-sitter-grammars/tree-sitter-zig",
    version = "0.0.37-1"
  }, {
    name = "tree-sitter-ziggy",
    url = "kristoff-it/ziggy",
    version = "0.0.19-1"
  }, {
    name = "tree-sitter-ziggy_schema",
    url = "kristoff-it/ziggy",
    version = "0.0.20-1"
  }, {
    name = "treedoc.nvim",
    url = "neo451/treedoc.nvim",
    version = "1.0.3-1"
  }, {
    name = "trouble.nvim",
    url = "folke/trouble.nvim",
    version = "3.7.1-1"
  }, {
    name = "ts-comments.nvim",
    url = "folke/ts-comments.nvim",
    version = "1.5.0-1"
  }, {
    name = "tsc.nvim",
    url = "dmmulroy/tsc.nvim",
    version = "2.9.0-1"
  }, {
    name = "twilight.nvim",
    url = "folke/twilight.nvim",
    version = "1.0.0-1"
  }, {
    name = "u.nvim",
    url = "jrop/u.nvim",
    version = "0.2.0-1"
  }, {
    name = "ui.nvim",
    url = "OXY2DEV/ui.nvim",
    version = "1.4.1-1"
  }, {
    name = "unimpaired.nvim",
    url = "tummetott/unimpaired.nvim",
    version = "0.4.0-1"
  }, {
    name = "unnest.nvim",
    url = "brianhuster/unnest.nvim",
    version = "0.1.1-1"
  }, {
    name = "utils.nvim",
    url = "wsdjeg/utils.nvim",
    version = "1.0.0-1"
  }, {
    name = "vgit.nvim",
    url = "tanvirtin/vgit.nvim",
    version = "1.0.6-1"
  }, {
    name = "visual-surround.nvim",
    url = "NStefan002/visual-surround.nvim",
    version = "1.0.1-1"
  }, {
    name = "which-key.nvim",
    url = "folke/which-key.nvim",
    version = "3.17.0-1"
  }, {
    name = "winbar.nvim",
    url = "wsdjeg/winbar.nvim",
    version = "1.0.0-1"
  }, {
    name = "windline.nvim",
    url = "windwp/windline.nvim",
    version = "1.1.0-1"
  }, {
    name = "winmove.nvim",
    url = "MisanthropicBit/winmove.nvim",
    version = "1.0.0-1"
  }, {
    name = "wormhole.nvim",
    url = "NStefan002/wormhole.nvim",
    version = "1.1.1-1"
  }, {
    name = "wrapping-paper.nvim",
    url = "benlubas/wrapping-paper.nvim",
    version = "1.0.0-1"
  }, {
    name = "yanky.nvim",
    url = "gbprod/yanky.nvim",
    version = "2.0.0-1"
  }, {
    name = "yarepl.nvim",
    url = "milanglacier/yarepl.nvim",
    version = "0.11.0-1"
  }, {
    name = "yazi.nvim",
    url = "mikavilpas/yazi.nvim",
    version = "13.1.0-1"
  }, {
    name = "zen-mode.nvim",
    url = "folke/zen-mode.nvim",
    version = "1.4.1-1"
  }, {
    name = "zettelkasten.nvim",
    url = "wsdjeg/zettelkasten.nvim",
    version = "2.1.0-1"
  }, {
    name = "zk-nvim",
    url = "zk-org/zk-nvim",
    version = "0.4.6-1"
  } }