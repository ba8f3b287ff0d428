--- Draft text rules and buffer edits shared by the ghost-text renderer and the native (0.12) path.
local M = {}

--- What is left to show of a draft whose range begins before the cursor, once the text
--- the buffer already holds between the range start and the cursor (`typed`) is taken
--- off; nil when the user typed something the draft does not continue. Leading
--- whitespace may differ: the server re-indents a draft (accepting applies its edit,
--- indentation included), and the client adds none of its own.
---@param draft string
---@param typed string
---@return string?
function M.remainder(draft, typed)
  draft, typed = draft:gsub('^%s+', ''), typed:gsub('^%s+', '')
  if draft:sub(1, #typed) ~= typed then
    return nil
  end
  return draft:sub(#typed + 1)
end

--- The next word of a remainder, with whatever separates it from the cursor.
---@param remainder string
function M.first_word(remainder)
  return remainder:match('^[^%w_]*[%w_]*')
end

--- A remainder up to and with its first line break (all of it when it has none). A remainder
--- that starts with the break (a draft after a block's header) takes the line after it too.
---@param remainder string
function M.first_line(remainder)
  local from = remainder:sub(1, 1) == '\n' and 2 or 1
  local stop = remainder:find('\n', from, true)
  return stop and remainder:sub(1, stop) or remainder
end

--- Length of `s` in UTF-16 code units (LSP's default position unit).
---@param s string
function M.utf16_length(s)
  if vim.fn.has('nvim-0.11') == 1 then
    return vim.str_utfindex(s, 'utf-16')
  end
  local _, utf16 = vim.str_utfindex(s)
  return utf16
end

--- Replaces the (0-based, end-exclusive) span with `text` and puts the cursor after it.
---@param text string
function M.replace(bufnr, row, col, end_row, end_col, text)
  local lines = vim.split(text, '\n', { plain = true })
  vim.api.nvim_buf_set_text(bufnr, row, col, end_row, end_col, lines)
  local last_col = (#lines == 1 and col or 0) + #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { row + #lines, last_col })
end

--- The buffer's text between (row, col) and the cursor, or nil when the cursor is before it.
function M.typed_since(bufnr, row, col)
  local cursor = vim.api.nvim_win_get_cursor(0)
  local crow, ccol = cursor[1] - 1, cursor[2]
  if crow < row or (crow == row and ccol < col) then
    return nil
  end
  local ok, lines = pcall(vim.api.nvim_buf_get_text, bufnr, row, col, crow, ccol, {})
  return ok and table.concat(lines, '\n') or nil
end

return M
