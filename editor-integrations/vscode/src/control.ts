/**
 * Whether drafts are wanted: `spd.enable` per language (a map with a "*" default, as Copilot's
 * `github.copilot.enable`), SPD: Toggle (off until toggled on again) and SPD: Snooze (off for a
 * while). Pure values: no `vscode` import, so Node tests run it.
 */

export interface Control {
  /** SPD: Toggle turned completions off. */
  off: boolean;
  /** Date.now() at which a snooze ends. */
  snoozedUntil?: number;
}

export const initialControl: Control = { off: false };

export const SNOOZE_MINUTES = [5, 15, 60] as const;

/**
 * Whether `spd.enable` turns completions on for `languageId`: a boolean for every language, or a map
 * whose entry for the language, else its "*", decides (on when neither says; a value that is no
 * boolean counts as unsaid).
 */
export function enabledFor(setting: unknown, languageId: string): boolean {
  if (typeof setting === "boolean") {
    return setting;
  }
  if (setting === null || typeof setting !== "object" || Array.isArray(setting)) {
    return true;
  }
  const map = setting as Record<string, unknown>;
  for (const key of [languageId, "*"]) {
    if (typeof map[key] === "boolean") {
      return map[key] as boolean;
    }
  }
  return true;
}

/** Minutes left of a snooze at `now` (rounded up), or undefined when none runs. */
export function snoozeLeft(control: Control, now: number): number | undefined {
  if (control.snoozedUntil === undefined || control.snoozedUntil <= now) {
    return undefined;
  }
  return Math.ceil((control.snoozedUntil - now) / 60_000);
}

export function toggled(control: Control): Control {
  const on = control.off || control.snoozedUntil !== undefined;
  return on ? { off: false } : { off: true };
}

export function snoozed(control: Control, minutes: number, now: number): Control {
  return minutes > 0 ? { off: false, snoozedUntil: now + minutes * 60_000 } : { off: control.off };
}

/** Whether to ask the server for drafts in a document of `languageId` now. */
export function wanted(control: Control, enable: unknown, languageId: string, now: number): boolean {
  return !control.off && snoozeLeft(control, now) === undefined && enabledFor(enable, languageId);
}
