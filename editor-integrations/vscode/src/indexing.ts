/**
 * What "SPD: Index Workspace" tells the user. The server's `spd.indexWorkspace`
 * only schedules the work and answers `{"started": bool}`; the index itself runs
 * in the background and reports through `$/progress` (begin … end, whose end
 * message carries the outcome). So the command says "started", and the end of
 * each indexing progress that follows says how it went.
 */

import { WorkDoneValue } from "./status";

export interface Notice {
  kind: "info" | "warning" | "error";
  text: string;
}

/** The message for the server's answer to `spd.indexWorkspace`. */
export function indexAnswerNotice(answer: unknown): Notice {
  const started = (answer as { started?: unknown } | null)?.started;
  if (started === true) {
    return { kind: "info", text: "SPD: indexing started (progress in the status bar)." };
  }
  if (started === false) {
    return { kind: "warning", text: "SPD: nothing to index: no workspace folder has an n-gram store (is spd.ngrams.enabled off, or no folder open?)." };
  }
  return { kind: "warning", text: `SPD: unexpected answer to indexing: ${JSON.stringify(answer)}` };
}

export function isIndexing(title: string): boolean {
  return /index/i.test(title);
}

/**
 * Follows the server's indexing progress; after `expect()` (the user asked),
 * the end of each indexing run becomes a notice. Runs the server starts on its
 * own (the first index, rescans) only move the status bar.
 */
export class IndexProgressWatch {
  private readonly titles = new Map<string, string>();
  private expecting = false;

  expect(): void {
    this.expecting = true;
  }

  /** The user's request was refused: nothing will end. */
  cancel(): void {
    this.expecting = false;
  }

  /** Feeds one `$/progress` value; returns the notice to show, if any. */
  progress(token: string | number, value: WorkDoneValue): Notice | undefined {
    const key = String(token);
    if (value.kind === "begin") {
      if (isIndexing(value.title)) {
        this.titles.set(key, value.title);
      }
      return undefined;
    }
    const title = this.titles.get(key);
    if (value.kind !== "end" || title === undefined) {
      return undefined;
    }
    this.titles.delete(key);
    if (!this.expecting) {
      return undefined;
    }
    this.expecting = this.titles.size > 0;
    const outcome = value.message ?? "done";
    return { kind: /fail/i.test(outcome) ? "error" : "info", text: `SPD: ${title} finished: ${outcome}` };
  }
}
