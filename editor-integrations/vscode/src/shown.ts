/**
 * Which draft VS Code shows, and how much of it was accepted, for the server's counts by rank
 * (the Copilot language server's `textDocument/didShowCompletion` and
 * `textDocument/didPartiallyAcceptCompletion`).
 *
 * VS Code's stable API has no shown or partly-accepted event (`handleDidShowCompletionItem` and
 * `handleDidPartiallyAcceptCompletionItem` are a proposed API, `inlineCompletionsAdditions`, which a
 * Marketplace extension cannot enable). So the extension follows what it can see: the first item of
 * an answer VS Code received (what it draws, the items being in rank order), the item that the
 * extension's own next/previous commands (bound to Alt+] / Alt+[, running VS Code's) cycle to, and,
 * after its accept-word / accept-line commands (Ctrl+Right, Ctrl+Alt+Right), the text between the
 * item's start and the cursor. The server counts each draft once per offer, so an answer
 * VS Code asks for again (typing through the same drafts) adds nothing.
 *
 * Pure values: no `vscode` import.
 */

export interface LspPosition {
  line: number;
  character: number;
}

/** An inline item as the server served it, with what the server reads back (its command's arguments). */
export interface ServedItem {
  insertText: string;
  range?: { start: LspPosition; end: LspPosition };
  command?: { title: string; command: string; arguments?: unknown[] };
}

export class ShownDrafts {
  private items: ServedItem[] = [];
  private index = 0;

  /** An answer VS Code received: its first item is the one drawn. */
  served(items: ServedItem[]): ServedItem | undefined {
    this.items = items;
    this.index = 0;
    return items[0];
  }

  /** Alt+] (`delta` 1) or Alt+[ (-1) moved the shown draft: the item now drawn. */
  cycled(delta: number): ServedItem | undefined {
    if (this.items.length === 0) {
      return undefined;
    }
    this.index = (((this.index + delta) % this.items.length) + this.items.length) % this.items.length;
    return this.items[this.index];
  }

  current(): ServedItem | undefined {
    return this.items[this.index];
  }

  /** The shown draft is gone (accepted, dismissed, the document changed elsewhere). */
  clear(): void {
    this.items = [];
    this.index = 0;
  }
}

/**
 * Copilot's `acceptedLength`: UTF-16 units from the start of the item's insertText to the end of what
 * is accepted, from `inserted` (the document's text between the item's range start and the cursor);
 * undefined when that text is not a start of the item (the user did something else).
 */
export function acceptedLength(item: ServedItem, inserted: string): number | undefined {
  return inserted.length > 0 && item.insertText.startsWith(inserted) ? inserted.length : undefined;
}
