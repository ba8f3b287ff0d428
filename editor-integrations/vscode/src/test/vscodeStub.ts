/**
 * A stand-in for the `vscode` module, installed before anything requires it, so
 * that the real vscode-languageclient (and the extension itself) run under Node.
 *
 * It models only what the client and the extension touch, and it models the parts
 * that matter for the tests as VS Code behaves: registering a command id twice
 * throws, configuration changes fire `onDidChangeConfiguration` with
 * `affectsConfiguration`, messages are recorded and dismissed.
 * Unknown `onDid*`/`onWill*` events are plain emitters; any other unknown member
 * is recorded in `missing` (and is undefined) so a gap is easy to see.
 */

import Module = require("node:module");
import * as path from "node:path";
import { pathToFileURL } from "node:url";

type Listener<T> = (event: T) => unknown;

export class Disposable {
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((item) => item.dispose()));
  }
  constructor(private readonly callOnDispose: () => unknown) {}
  dispose(): void {
    this.callOnDispose();
  }
}

export class EventEmitter<T> {
  private listeners = new Set<Listener<T>>();
  readonly event = (listener: Listener<T>, thisArg?: unknown, disposables?: Disposable[]): Disposable => {
    const bound: Listener<T> = (event) => listener.call(thisArg, event);
    this.listeners.add(bound);
    const disposable = new Disposable(() => this.listeners.delete(bound));
    disposables?.push(disposable);
    return disposable;
  };
  fire(event: T): void {
    [...this.listeners].forEach((listener) => listener(event));
  }
  dispose(): void {
    this.listeners.clear();
  }
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly path: string,
    private readonly text: string,
  ) {}
  static file(file: string): Uri {
    return new Uri("file", file, pathToFileURL(file).toString());
  }
  static parse(text: string): Uri {
    const url = new URL(text);
    return new Uri(url.protocol.replace(/:$/, ""), decodeURIComponent(url.pathname), text);
  }
  get fsPath(): string {
    return this.path;
  }
  get authority(): string {
    return "";
  }
  get query(): string {
    return "";
  }
  get fragment(): string {
    return "";
  }
  toString(): string {
    return this.text;
  }
  toJSON(): string {
    return this.text;
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
  isBefore(other: Position): boolean {
    return this.line < other.line || (this.line === other.line && this.character < other.character);
  }
  isBeforeOrEqual(other: Position): boolean {
    return !other.isBefore(this);
  }
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(start: Position | number, end: Position | number, endLine?: number, endCharacter?: number) {
    this.start = typeof start === "number" ? new Position(start, end as number) : start;
    this.end = typeof start === "number" ? new Position(endLine!, endCharacter!) : (end as Position);
  }
  get isSingleLine(): boolean {
    return this.start.line === this.end.line;
  }
  contains(position: Position): boolean {
    return this.start.isBeforeOrEqual(position) && position.isBeforeOrEqual(this.end);
  }
}

export class SnippetString {
  constructor(readonly value = "") {}
}

export class MarkdownString {
  constructor(
    readonly value = "",
    readonly supportThemeIcons = false,
  ) {}
}

export class CompletionItem {
  insertText?: string | SnippetString;
  range?: Range | { inserting: Range; replacing: Range };
  filterText?: string;
  constructor(readonly label: string | { label: string }) {}
}

export class CompletionList {
  constructor(
    readonly items: CompletionItem[] = [],
    readonly isIncomplete = false,
  ) {}
}

export class InlineCompletionItem {
  constructor(
    readonly insertText: string | SnippetString,
    readonly range?: Range,
    readonly command?: { command: string; arguments?: unknown[] },
  ) {}
}

export class InlineCompletionList {
  constructor(readonly items: InlineCompletionItem[]) {}
}

export class TextEdit {
  constructor(
    readonly range: Range,
    readonly newText: string,
  ) {}
}

export class CancellationError extends Error {}

export class CancellationTokenSource {
  private readonly emitter = new EventEmitter<void>();
  readonly token = { isCancellationRequested: false, onCancellationRequested: this.emitter.event };
  cancel(): void {
    this.token.isCancellationRequested = true;
    this.emitter.fire();
  }
  dispose(): void {
    this.emitter.dispose();
  }
}

class TabInput {}

/** Base classes the client extends at load time; their behaviour is never used here. */
class Opaque {
  constructor(..._args: unknown[]) {}
}

/** One distinct subclass of `base` per name. */
function subclasses(base: new (...args: unknown[]) => object, names: string[]): Record<string, unknown> {
  return Object.fromEntries(names.map((name) => [name, class extends base {}]));
}

/** Enums the client reads at load time: each member is a distinct, stable value. */
const ENUMS = [
  "CodeActionKind", "CodeActionTriggerKind", "CompletionItemKind", "CompletionItemTag", "CompletionTriggerKind",
  "DiagnosticSeverity", "DiagnosticTag", "DocumentHighlightKind", "FileType", "FoldingRangeKind", "NotebookCellKind",
  "SignatureHelpTriggerKind", "SymbolKind", "SymbolTag", "TextDocumentSaveReason",
];

function enumeration(name: string): Record<string, string> {
  return new Proxy({}, { get: (_target, member) => `${name}.${String(member)}` });
}

/** What a test controls and observes. */
export interface Message {
  kind: "info" | "warning" | "error";
  text: string;
  items: unknown[];
}

export const recorded = {
  messages: [] as Message[],
  missing: new Set<string>(),
};

const configuration = new Map<string, unknown>();
const configurationChanged = new EventEmitter<{ affectsConfiguration(section: string): boolean }>();
const commandTable = new Map<string, (...args: unknown[]) => unknown>();
let folders: { uri: Uri; name: string; index: number }[] = [];

/** Sets `spd.*` values (undefined removes one) and fires onDidChangeConfiguration as VS Code does. */
export function setConfiguration(values: Record<string, unknown>, { fire = true }: { fire?: boolean } = {}): void {
  for (const [key, value] of Object.entries(values)) {
    value === undefined ? configuration.delete(key) : configuration.set(key, value);
  }
  if (fire) {
    const keys = Object.keys(values);
    configurationChanged.fire({
      affectsConfiguration: (section) => keys.some((key) => key === section || key.startsWith(`${section}.`)),
    });
  }
}

export function setWorkspaceFolders(paths: string[]): void {
  folders = paths.map((folder, index) => ({ uri: Uri.file(folder), name: path.basename(folder), index }));
}

export function resetRecorded(): void {
  recorded.messages.length = 0;
}

/** Runs a command registered through `commands.registerCommand`, as the palette would. */
export async function runCommand(id: string, ...args: unknown[]): Promise<unknown> {
  const handler = commandTable.get(id);
  if (handler === undefined) {
    throw new Error(`command '${id}' not found`);
  }
  return handler(...args);
}

function namespace<T extends object>(name: string, members: T): T {
  const events = new Map<string, EventEmitter<unknown>>();
  return new Proxy(members, {
    get(target, property) {
      if (property in target || typeof property === "symbol") {
        return (target as Record<string | symbol, unknown>)[property];
      }
      if (/^on(Did|Will)[A-Z]/.test(property)) {
        if (!events.has(property)) {
          events.set(property, new EventEmitter<unknown>());
        }
        return events.get(property)!.event;
      }
      recorded.missing.add(`${name}.${property}`);
      return undefined;
    },
  });
}

function message(kind: Message["kind"]) {
  return async (text: string, ...items: unknown[]): Promise<unknown> => {
    recorded.messages.push({ kind, text, items });
    return undefined; // dismissed, as when the user clicks none of the items
  };
}

function outputChannel(name: string) {
  const lines: string[] = [];
  const append = (line: string) => {
    lines.push(line);
  };
  return {
    name,
    lines,
    logLevel: 2,
    onDidChangeLogLevel: new EventEmitter<number>().event,
    append,
    appendLine: append,
    replace: append,
    clear: () => undefined,
    trace: append,
    debug: append,
    info: append,
    warn: append,
    error: (line: string | Error) => append(String(line)),
    show: () => undefined,
    hide: () => undefined,
    dispose: () => undefined,
  };
}

export const outputs: ReturnType<typeof outputChannel>[] = [];
export const statusItems: { text: string; tooltip: string; command?: string }[] = [];
/** The inline completion providers registered (vscode-languageclient's, with the extension's middleware). */
export const inlineProviders: { provideInlineCompletionItems(...args: unknown[]): Promise<unknown> }[] = [];
/** What `window.showQuickPick` was offered, and the answer a test has queued (else dismissed). */
export const quickPicks: { items: unknown[] }[] = [];
export const quickPickAnswers: ((items: unknown[]) => unknown)[] = [];
/** Commands run through `commands.executeCommand` that nobody registered (VS Code's own). */
export const builtinCommands: string[] = [];

const vscode = {
  version: "1.91.0",
  Disposable,
  EventEmitter,
  Uri,
  Position,
  Range,
  SnippetString,
  MarkdownString,
  CompletionItem,
  CompletionList,
  InlineCompletionItem,
  InlineCompletionList,
  TextEdit,
  CancellationError,
  CancellationTokenSource,
  ...subclasses(Opaque, ["CallHierarchyItem", "CodeLens", "DocumentLink", "InlayHint", "SymbolInformation", "TypeHierarchyItem", "CodeAction", "Diagnostic"]),
  ...subclasses(TabInput, ["TabInputText", "TabInputTextDiff", "TabInputNotebook", "TabInputCustom"]),
  StatusBarAlignment: { Left: 1, Right: 2 },
  ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
  LogLevel: { Off: 0, Trace: 1, Debug: 2, Info: 3, Warning: 4, Error: 5 },
  InlineCompletionTriggerKind: { Invoke: 0, Automatic: 1 },
  ...Object.fromEntries(ENUMS.map((name) => [name, enumeration(name)])),
  env: namespace("env", { appName: "VS Code stub", language: "en", openExternal: async () => false }),
  commands: namespace("commands", {
    registerCommand(id: string, handler: (...args: unknown[]) => unknown): Disposable {
      if (commandTable.has(id)) {
        throw new Error(`command '${id}' already exists`); // as VS Code does
      }
      commandTable.set(id, handler);
      return new Disposable(() => commandTable.delete(id));
    },
    async executeCommand(command: string, ...args: unknown[]): Promise<unknown> {
      const handler = commandTable.get(command);
      if (handler === undefined) {
        builtinCommands.push(command);
      }
      return handler?.(...args);
    },
  }),
  window: namespace("window", {
    activeTextEditor: undefined,
    visibleTextEditors: [],
    tabGroups: { all: [], onDidChangeTabs: new EventEmitter<unknown>().event, onDidChangeTabGroups: new EventEmitter<unknown>().event },
    showInformationMessage: message("info"),
    showWarningMessage: message("warning"),
    showErrorMessage: message("error"),
    showTextDocument: async () => undefined,
    async showQuickPick(items: unknown[]): Promise<unknown> {
      quickPicks.push({ items });
      return quickPickAnswers.shift()?.(items);
    },
    createOutputChannel(name: string) {
      const channel = outputChannel(name);
      outputs.push(channel);
      return channel;
    },
    createStatusBarItem() {
      const item = { text: "", tooltip: "", command: undefined, show: () => undefined, hide: () => undefined, dispose: () => undefined };
      statusItems.push(item);
      return item;
    },
    async withProgress<R>(_options: unknown, task: (progress: { report(value: unknown): void }, token: unknown) => Promise<R>): Promise<R> {
      return task({ report: () => undefined }, new CancellationTokenSource().token);
    },
  }),
  workspace: namespace("workspace", {
    get workspaceFolders() {
      return folders.length > 0 ? folders : undefined;
    },
    textDocuments: [],
    notebookDocuments: [],
    onDidChangeConfiguration: configurationChanged.event,
    getConfiguration(section?: string) {
      const key = (name: string) => (section ? `${section}.${name}` : name);
      return {
        get: (name: string, fallback?: unknown) => (configuration.has(key(name)) ? configuration.get(key(name)) : fallback),
        has: (name: string) => configuration.has(key(name)),
        inspect: () => undefined,
        update: async () => undefined,
      };
    },
    getWorkspaceFolder(uri: Uri) {
      return folders.find((folder) => uri.fsPath.startsWith(folder.uri.fsPath));
    },
    createFileSystemWatcher() {
      const never = new EventEmitter<unknown>().event;
      return { onDidCreate: never, onDidChange: never, onDidDelete: never, dispose: () => undefined };
    },
    applyEdit: async () => false,
  }),
  languages: namespace("languages", {
    match: () => 0,
    createDiagnosticCollection: () => ({ set: () => undefined, delete: () => undefined, clear: () => undefined, dispose: () => undefined }),
    registerInlineCompletionItemProvider: (_selector: unknown, provider: (typeof inlineProviders)[number]) => {
      inlineProviders.push(provider);
      return new Disposable(() => inlineProviders.splice(inlineProviders.indexOf(provider), 1));
    },
    registerCompletionItemProvider: () => new Disposable(() => undefined),
  }),
};

type Loader = (request: string, parent: unknown, isMain: boolean) => unknown;
const loader = Module as unknown as { _load: Loader };
const originalLoad = loader._load;
loader._load = function (request: string, parent: unknown, isMain: boolean) {
  return request === "vscode" ? vscode : originalLoad.call(this, request, parent, isMain);
};

export default vscode;
