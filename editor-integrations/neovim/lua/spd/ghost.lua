--- Ghost text for Neovim 0.10/0.11, which lack vim.lsp.inline_completion: request drafts
--- while typing (debounced, stale requests cancelled), draw the selected one as inline
--- virtual text (further lines as virtual lines) with an "i/k" counter, and accept,
--- accept a word, cycle or dismiss. Drafts stay valid while the user types through them.
local api = vim.api
local client_mod = require('spd.client')
local text = require('spd.text')

local M = {}

M.namespace = api.nvim_create_namespace('spd.ghost')

local AUTOMATIC, INVOKED = 2, 1

---@class spd.GhostItem
---@field text string the whole insertText
---@field row integer range start, 0-based
---@field col integer range start, byte column
---@field tail integer bytes after the cursor (at request time) that the draft replaces
---@field command lsp.Command?
---@field raw table the item as the server sent it (echoed in didShowCompletion / didPartiallyAcceptCompletion)

local config ---@type table
local enabled = true
local state = {
  bufnr = nil, ---@type integer?
  items = {}, ---@type spd.GhostItem[]
  selected = nil, ---@type spd.GhostItem?
  pending = nil, ---@type { client: vim.lsp.Client, id: integer }?
  requested = nil, ---@type string? where the last request was made: "changedtick:row:col"
  seen = nil, ---@type { tick: integer, row: integer, col: integer }? buffer and cursor at the last event
  seq = 0,
  drawn = nil, ---@type spd.GhostItem? the item last reported as shown
}
local timer = assert(vim.uv.new_timer())

local function insert_mode()
  return api.nvim_get_mode().mode:sub(1, 1) == 'i'
end

local function cursor()
  local pos = api.nvim_win_get_cursor(0)
  return pos[1] - 1, pos[2]
end

--- Identifies the buffer text and cursor a request answers for.
local function here()
  local row, col = cursor()
  return ('%d:%d:%d'):format(api.nvim_buf_get_changedtick(0), row, col)
end

--- The drafts that still fit what is typed, de-duplicated, each with what remains to show.
---@return { item: spd.GhostItem, ghost: string }[] shown, integer index of the selected one
local function shown()
  local bufnr = api.nvim_get_current_buf()
  local out, seen, index = {}, {}, 1
  if bufnr ~= state.bufnr then
    return out, index
  end
  for _, item in ipairs(state.items) do
    local typed = text.typed_since(bufnr, item.row, item.col)
    local ghost = typed and text.remainder(item.text, typed)
    if ghost and ghost ~= '' and not seen[ghost] then
      seen[ghost] = true
      out[#out + 1] = { item = item, ghost = ghost }
      if item == state.selected then
        index = #out
      end
    end
  end
  return out, index
end

--- shown(), or nothing while ghost text must not be seen (off, not inserting, popup menu open).
local function visible()
  if not enabled or not insert_mode() or vim.fn.pumvisible() == 1 then
    return {}, 1
  end
  return shown()
end

local function hide()
  if state.bufnr and api.nvim_buf_is_valid(state.bufnr) then
    api.nvim_buf_clear_namespace(state.bufnr, M.namespace, 0, -1)
  end
end

--- Tells the server the draft on screen (Copilot's `textDocument/didShowCompletion`), once per item.
local function report_shown(item)
  if item == state.drawn then
    return
  end
  state.drawn = item
  local client = client_mod.get(state.bufnr)
  if client then
    client_mod.notify(client, 'textDocument/didShowCompletion', { item = item.raw })
  end
end

local function render()
  hide()
  local drafts, index = visible()
  if #drafts == 0 then
    return
  end
  report_shown(drafts[index].item)
  local lines = vim.split(drafts[index].ghost, '\n', { plain = true })
  local row, col = cursor()
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { lines[i], config.hl_group } }
  end
  api.nvim_buf_set_extmark(state.bufnr, M.namespace, row, col, {
    virt_text = { { lines[1], config.hl_group } },
    virt_text_pos = 'inline',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    -- 'replace': the ghost keeps its own colour where the cursor's bracket is matched
    -- (MatchParen would otherwise combine into bold normal text).
    hl_mode = 'replace',
  })
  if #drafts > 1 then
    api.nvim_buf_set_extmark(state.bufnr, M.namespace, row, 0, {
      virt_text = { { (' %d/%d'):format(index, #drafts), config.counter_hl_group } },
      virt_text_pos = 'eol',
    })
  end
end

local function cancel_pending()
  state.seq = state.seq + 1
  if state.pending then
    client_mod.cancel(state.pending.client, state.pending.id)
    state.pending = nil
  end
end

--- LSP positions (in the client's encoding) -> byte columns of the line as it was requested.
local function byte_col(line, character, encoding)
  if encoding == 'utf-8' then
    return math.min(character, #line)
  end
  local ok, col
  if vim.fn.has('nvim-0.11') == 1 then
    ok, col = pcall(vim.str_byteindex, line, encoding, character, false)
  else
    ok, col = pcall(vim.str_byteindex, line, character, encoding == 'utf-16')
  end
  return ok and col or #line
end

local function to_items(result, line, row, col, encoding)
  local items = {}
  for _, item in ipairs(result.items or result) do
    local insert = type(item.insertText) == 'table' and item.insertText.value or item.insertText
    local range = item.range
    local start_row = range and range.start.line or row
    if type(insert) == 'string' and start_row == row then
      local end_col = range and range['end'].line == row and byte_col(line, range['end'].character, encoding) or col
      items[#items + 1] = {
        text = insert,
        row = row,
        col = range and byte_col(line, range.start.character, encoding) or col,
        tail = math.max(0, end_col - col),
        command = item.command,
        raw = item,
      }
    end
  end
  return items
end

---@param kind integer InlineCompletionTriggerKind
local function request(kind)
  local bufnr = api.nvim_get_current_buf()
  local client = client_mod.get(bufnr)
  if not client then
    return
  end
  cancel_pending()
  state.requested = here()
  local seq = state.seq
  local row, col = cursor()
  local line = api.nvim_get_current_line()
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = kind }
  local ok, id = client_mod.request(client, 'textDocument/inlineCompletion', params, function(err, result)
    if seq ~= state.seq then
      return
    end
    state.pending = nil
    if err or not result or api.nvim_get_current_buf() ~= bufnr or not insert_mode() then
      return
    end
    state.bufnr, state.selected = bufnr, nil
    state.items = to_items(result, line, row, col, client.offset_encoding)
    render()
  end, bufnr)
  if ok and id then
    state.pending = { client = client, id = id }
  end
end

local function schedule_request()
  timer:stop()
  if enabled and config.auto_trigger then
    timer:start(config.debounce_ms, 0, vim.schedule_wrap(function()
      if insert_mode() then
        request(AUTOMATIC)
      end
    end))
  end
end

--- Drops the drafts and any request in flight.
function M.clear()
  timer:stop()
  cancel_pending()
  hide()
  state.items, state.selected, state.requested, state.drawn = {}, nil, nil, nil
end

--- Grey whatever the terminal: explicit gui and cterm colours (Comment has no cterm
--- colour in many schemes), `default` so a colour scheme or the user can restyle it.
function M.define_highlights()
  api.nvim_set_hl(0, 'SpdGhost', { default = true, fg = '#808080', ctermfg = 244 })
end

---@return { text: string, index: integer, count: integer, item: spd.GhostItem }? the draft on screen
function M.current()
  local drafts, index = visible()
  if #drafts == 0 then
    return nil
  end
  return { text = drafts[index].ghost, index = index, count = #drafts, item = drafts[index].item }
end

--- Inserts the shown draft; reports it to the server through the item's command.
---@return boolean handled
function M.accept()
  local draft = M.current()
  if not draft then
    return false
  end
  local item = draft.item
  local row, col = cursor()
  local end_col = math.min(col + item.tail, #api.nvim_get_current_line())
  -- Its own undo step: `u` takes back the draft, not what was typed before it.
  vim.go.undolevels = vim.go.undolevels
  text.replace(state.bufnr, item.row, item.col, row, end_col, item.text)
  local client = client_mod.get(state.bufnr)
  M.clear()
  if item.command and client then
    client_mod.execute(client, item.command.command, item.command.arguments)
  end
  return true
end

--- Tells the server how much of `item` is in the buffer now (Copilot's `didPartiallyAcceptCompletion`:
--- UTF-16 units from the start of its insertText to the cursor).
local function report_partial(item)
  local client = client_mod.get(state.bufnr)
  local accepted = text.typed_since(state.bufnr, item.row, item.col)
  if client and accepted then
    client_mod.notify(client, 'textDocument/didPartiallyAcceptCompletion',
      { item = item.raw, acceptedLength = text.utf16_length(accepted) })
  end
end

--- Inserts `part` of the shown draft (its next word or line) and keeps showing the rest; all of it
--- is a whole accept.
local function accept_part(part)
  local draft = M.current()
  if not draft then
    return false
  end
  local piece = part(draft.text)
  if piece == draft.text then
    return M.accept()
  end
  local row, col = cursor()
  state.selected = draft.item
  text.replace(state.bufnr, row, col, row, col, piece)
  cancel_pending()
  state.requested = here() -- the rest of this draft is the answer here: no new request for it
  report_partial(draft.item)
  render()
  return true
end

--- Inserts the next word of the shown draft and keeps showing the rest.
---@return boolean handled
function M.accept_word()
  return accept_part(text.first_word)
end

--- Inserts the shown draft up to its next line break (and the break) and keeps showing the rest.
---@return boolean handled
function M.accept_line()
  return accept_part(text.first_line)
end

--- Shows the next (delta = 1) or previous (-1) draft; asks for drafts when none is shown.
---@return boolean handled
function M.cycle(delta)
  local drafts, index = visible()
  if #drafts > 0 then
    state.selected = drafts[(index - 1 + delta) % #drafts + 1].item
    render()
    return true
  end
  if enabled and insert_mode() then
    request(INVOKED)
    return true
  end
  return false
end

---@return boolean handled
function M.dismiss()
  local handled = M.current() ~= nil
  M.clear()
  return handled
end

function M.set_enabled(value)
  enabled = value
  if not value then
    M.clear()
  end
end

--- Whether the cursor moved while the text stayed the same (an arrow key, a click):
--- the drafts were made for the old place, so they go at once.
local function moved_without_typing()
  local row, col = cursor()
  local now = { tick = api.nvim_buf_get_changedtick(0), row = row, col = col }
  local before = state.seen
  state.seen = now
  return before ~= nil and before.tick == now.tick and (before.row ~= row or before.col ~= col)
end

--- Text or cursor moved: redraw what still fits, and unless the last request was made
--- right here (autocommands fire once typeahead is done, after <M-]> may have asked),
--- drop it as stale and ask again after the debounce.
local function on_change()
  if moved_without_typing() then
    M.clear()
  end
  render()
  if state.requested ~= here() then
    cancel_pending()
    schedule_request()
  end
end

---@param opts table resolved config
function M.setup(opts)
  config = opts
  M.define_highlights()
  local group = api.nvim_create_augroup('spd.ghost', {})
  api.nvim_create_autocmd('ColorScheme', { group = group, callback = M.define_highlights })
  api.nvim_create_autocmd({ 'InsertEnter', 'TextChangedI', 'CursorMovedI' }, {
    group = group,
    callback = function(args)
      if client_mod.get(args.buf) then
        if state.bufnr ~= args.buf then
          M.clear()
          state.bufnr, state.seen = args.buf, nil
        end
        on_change()
      end
    end,
  })
  api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, { group = group, callback = M.clear })
  api.nvim_create_autocmd('CompleteChanged', { group = group, callback = hide })
  api.nvim_create_autocmd('CompleteDone', { group = group, callback = vim.schedule_wrap(render) })
end

return M
