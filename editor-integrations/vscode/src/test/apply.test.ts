/**
 * What VS Code does with the real server's answers: each item goes through
 * vscode-languageclient's own protocol converter (`protocol2CodeConverter` of a
 * real LanguageClient, over the `vscode` stub), then is applied the way VS Code
 * applies it (rules from vscode.d.ts):
 * - CompletionItem: `range` (from `textEdit`) replaced by `insertText`; without a
 *   range, the current word's start up to the cursor (the default insert mode);
 *   a range must be single-line and contain the cursor; the item is listed only
 *   if the typed text in its range (leading blanks skipped) fuzzy-matches
 *   `filterText` (else the label).
 * - InlineCompletionItem: `range` (else the word at the cursor) replaced by
 *   `insertText`; same line; shown only if the text it replaces is a prefix of
 *   `filterText` (else `insertText`).
 * Either way the line must become the typed text + the draft (the `spd.accept`
 * argument) + the text that was after the cursor.
 */

import * as stub from "./vscodeStub";
import { strict as assert } from "node:assert";
import { after, before, describe, test } from "node:test";
import { LanguageClient } from "vscode-languageclient/node";
import { CompletionList, CompletionRequest, InlineCompletionList, InlineCompletionRequest, InlineCompletionTriggerKind } from "vscode-languageserver-protocol/node";
import { closeSession, openSession, realServerMissing, REAL_SERVER, Session } from "./lspSession";

const LINES = [
  "import os",
  "",
  "def list_python_files(root):",
  "    result = []",
  "    for dirpath, dirnames, filenames in os.walk(root):",
  "        for name in filenames:",
  "            if name.end",
  "                result.append(os.path.join(dirpath, ))",
  "    return sorted(result)",
  "",
];

/** Cursor positions: a line end, and inside an auto-paired call. */
const POSITIONS = [
  { line: 6, character: LINES[6].length },
  { line: 7, character: LINES[7].indexOf(", )") + 2 },
];

/** VS Code's default word pattern (`DEFAULT_WORD_REGEXP`): a run of non-separators, or a number. */
const WORD_SEPARATORS = "`~!@#$%^&*()-=+[{]}\\|;:'\",.<>/? \t";

function wordStart(line: string, character: number): number {
  let start = character;
  while (start > 0 && !WORD_SEPARATORS.includes(line[start - 1])) {
    start -= 1;
  }
  return start;
}

/** Subsequence match, the first character at a word start, as VS Code's fuzzyScore requires. */
function fuzzyMatches(pattern: string, target: string): boolean {
  if (pattern === "") {
    return true;
  }
  const lower = target.toLowerCase();
  const first = [...lower].findIndex((ch, i) => ch === pattern[0].toLowerCase() && (i === 0 || WORD_SEPARATORS.includes(lower[i - 1])));
  let at = first;
  for (const ch of pattern.toLowerCase().slice(1)) {
    at = at < 0 ? -1 : lower.indexOf(ch, at + 1);
  }
  return first >= 0 && at >= 0;
}

interface Applied {
  line: string;
  draft: string;
}

type CodeRange = stub.Range;

function applyRange(line: string, range: CodeRange, text: string): string {
  return line.slice(0, range.start.character) + text + line.slice(range.end.character);
}

function draftOf(command: { arguments?: unknown[] } | undefined): string {
  const draft = command?.arguments?.[2];
  assert.equal(typeof draft, "string", `spd.accept carries no draft: ${JSON.stringify(command)}`);
  return draft as string;
}

function checkRange(range: CodeRange, position: { line: number; character: number }): void {
  assert.ok(range.isSingleLine, "range spans lines");
  assert.ok(range.contains(new stub.Position(position.line, position.character)), "range does not contain the cursor");
}

describe("the real server's items, applied as VS Code applies them", { skip: realServerMissing }, () => {
  let session: Session;
  const converter = new LanguageClient("spd-test", "SPD test", { command: "unused" }, {}).protocol2CodeConverter;

  before(async () => {
    session = await openSession(REAL_SERVER, ["--stdio"], { k: 2, maxTokens: 8, ngrams: { enabled: false, index: false } }, LINES.join("\n"));
  });
  after(() => closeSession(session));

  async function completions(position: { line: number; character: number }): Promise<Applied[]> {
    const answer = await session.connection.sendRequest(CompletionRequest.type, { textDocument: { uri: session.uri }, position });
    const result = await converter.asCompletionResult(answer as CompletionList);
    const items = Array.isArray(result) ? result : (result?.items ?? []);
    const line = LINES[position.line];
    return items.map((item) => {
      assert.equal(typeof item.insertText, "string", "a snippet would expand `$` in code");
      const text = (item.insertText as string | undefined) ?? (typeof item.label === "string" ? item.label : item.label.label);
      const start = wordStart(line, position.character);
      const range = (item.range as CodeRange | undefined) ?? new stub.Range(position.line, start, position.line, position.character);
      assert.ok(range instanceof stub.Range, "insert/replace ranges are not expected from spd-lsp");
      checkRange(range, position);
      const typed = line.slice(range.start.character, position.character).trimStart();
      const label = typeof item.label === "string" ? item.label : item.label.label;
      assert.ok(fuzzyMatches(typed, item.filterText ?? label), `VS Code would filter out ${JSON.stringify(item.filterText ?? label)} for ${JSON.stringify(typed)}`);
      return { line: applyRange(line, range, text), draft: draftOf(item.command) };
    });
  }

  async function inlineCompletions(position: { line: number; character: number }): Promise<Applied[]> {
    const answer = await session.connection.sendRequest(InlineCompletionRequest.type, {
      textDocument: { uri: session.uri },
      position,
      context: { triggerKind: InlineCompletionTriggerKind.Automatic },
    });
    const result = await converter.asInlineCompletionResult(answer as InlineCompletionList);
    const items = Array.isArray(result) ? result : (result?.items ?? []);
    const line = LINES[position.line];
    return items.map((item) => {
      assert.equal(typeof item.insertText, "string");
      const range = (item.range as CodeRange | undefined) ?? new stub.Range(position.line, wordStart(line, position.character), position.line, position.character);
      checkRange(range, position);
      const replaced = line.slice(range.start.character, range.end.character);
      const filter = item.filterText ?? (item.insertText as string);
      assert.ok(filter.startsWith(replaced), `VS Code would not show ${JSON.stringify(filter)}: it does not start with ${JSON.stringify(replaced)}`);
      return { line: applyRange(line, range, item.insertText as string), draft: draftOf(item.command) };
    });
  }

  function assertInsertsExactlyTheDraft(applied: Applied[][]): void {
    assert.ok(applied.flat().length > 0, "the server offered nothing at any position: nothing was checked");
    applied.forEach((items, i) => {
      const { line, character } = POSITIONS[i];
      const text = LINES[line];
      for (const item of items) {
        assert.equal(item.line, text.slice(0, character) + item.draft + text.slice(character));
      }
    });
  }

  test("textDocument/completion (the fallback) inserts exactly the draft", { timeout: 300_000 }, async () => {
    const applied: Applied[][] = [];
    for (const position of POSITIONS) {
      applied.push(await completions(position));
    }
    assertInsertsExactlyTheDraft(applied);
  });

  test("textDocument/inlineCompletion replaces its range with exactly the draft", { timeout: 300_000 }, async () => {
    const applied: Applied[][] = [];
    for (const position of POSITIONS) {
      applied.push(await inlineCompletions(position));
    }
    assertInsertsExactlyTheDraft(applied);
  });
});
