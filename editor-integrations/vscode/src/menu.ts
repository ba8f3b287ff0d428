/**
 * The quick pick the status item opens: turn completions off or on, snooze them, and the other
 * SPD commands. Pure values: no `vscode` import.
 */

import { CLIENT_COMMANDS } from "./commands";
import { Control, SNOOZE_MINUTES, snoozeLeft } from "./control";

export interface MenuItem {
  label: string;
  description?: string;
  /** The command to run and its arguments. */
  command: string;
  args: unknown[];
}

export function menuItems(control: Control, now: number): MenuItem[] {
  const left = snoozeLeft(control, now);
  const paused = control.off || left !== undefined;
  const items: MenuItem[] = [
    paused
      ? { label: "$(eye) Turn completions on", description: left !== undefined ? `snoozed for ${left} more min` : "off now",
          command: CLIENT_COMMANDS.toggle, args: [] }
      : { label: "$(eye-closed) Turn completions off", command: CLIENT_COMMANDS.toggle, args: [] },
    ...SNOOZE_MINUTES.map((minutes) => ({
      label: `$(watch) Snooze for ${minutes} minutes`, command: CLIENT_COMMANDS.snooze, args: [minutes],
    })),
    { label: "$(info) Show Status", command: CLIENT_COMMANDS.showStatus, args: [] },
    { label: "$(database) Index Workspace", command: CLIENT_COMMANDS.indexWorkspace, args: [] },
    { label: "$(debug-restart) Restart Server", command: CLIENT_COMMANDS.restart, args: [] },
  ];
  return items;
}
