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
} as const;
