/**
 * The extension's own commands and the server commands they call.
 *
 * The client ids differ from the server's: vscode-languageclient registers every
 * command the server lists in `executeCommandProvider` (that is how `spd.accept`,
 * attached to each inline item, reaches the server), so reusing the names would clash.
 */

export const SERVER_COMMANDS = {
  index: "spd.indexWorkspace",
  status: "spd.status",
  accept: "spd.accept",
} as const;

export const CLIENT_COMMANDS = {
  indexWorkspace: "spd.client.indexWorkspace",
  showStatus: "spd.client.showStatus",
  restart: "spd.client.restart",
  toggle: "spd.client.toggle",
  snooze: "spd.client.snooze",
  menu: "spd.client.menu",
  // VS Code's inline-suggestion commands, run by the extension's keys so it sees the draft shown and
  // partly accepted (shown.ts); hidden from the palette.
  showNext: "spd.client.showNext",
  showPrevious: "spd.client.showPrevious",
  acceptNextWord: "spd.client.acceptNextWord",
  acceptNextLine: "spd.client.acceptNextLine",
} as const;

/** What the wrappers run, in VS Code's own inline-suggestion controller. */
export const VSCODE_INLINE = {
  showNext: "editor.action.inlineSuggest.showNext",
  showPrevious: "editor.action.inlineSuggest.showPrevious",
  acceptNextWord: "editor.action.inlineSuggest.acceptNextWord",
  acceptNextLine: "editor.action.inlineSuggest.acceptNextLine",
} as const;

/** The server's notifications, as the Copilot language server names them, and its pushed status. */
export const NOTIFICATIONS = {
  didShow: "textDocument/didShowCompletion",
  didPartiallyAccept: "textDocument/didPartiallyAcceptCompletion",
  status: "spd/didChangeStatus",
} as const;
