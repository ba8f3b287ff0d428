/**
 * VS Code glue: start `spd-lsp --stdio`, forward settings, show status and
 * latency, and wire the commands. Inline completions themselves are
 * vscode-languageclient's built-in `textDocument/inlineCompletion` feature; the
 * `spd.accept` command on each item is registered by the client from the
 * server's `executeCommandProvider`, so accepting a draft reports it. The
 * middleware asks nothing where `spd.enable`, SPD: Toggle or SPD: Snooze say
 * no, and tells the server which draft is shown and how much of one is
 * accepted (shown.ts); the server pushes its state (`spd/didChangeStatus`).
 */

import * as fs from "node:fs";
import * as vscode from "vscode";
import {
  CloseAction,
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
} from "vscode-languageclient/node";
import { CLIENT_COMMANDS, NOTIFICATIONS, SERVER_COMMANDS, VSCODE_INLINE } from "./commands";
import { enabledFor, SNOOZE_MINUTES, snoozed, snoozeLeft, toggled, wanted } from "./control";
import { IndexProgressWatch, indexAnswerNotice, isIndexing, Notice } from "./indexing";
import { menuItems } from "./menu";
import { acceptedLength, ServedItem, ShownDrafts } from "./shown";
import { ServerLifecycle } from "./lifecycle";
import { SpdLanguageClient } from "./spdClient";
import { notFoundMessage, resolveServerPath } from "./serverPath";
import { configurationChange, toServerSettings } from "./settings";
import {
  applyProgress,
  formatStatus,
  initialState,
  modelOf,
  recordLatency,
  settled,
  StatusState,
  statusView,
  WorkDoneValue,
  withControl,
  withLanguage,
  withModel,
  withPhase,
  withServer,
} from "./status";

const OPEN_SETTINGS = "Open Settings";

let lifecycle: ServerLifecycle<LanguageClient>;
let state: StatusState = initialState;
let statusItem: vscode.StatusBarItem;
let output: vscode.LogOutputChannel;
const indexWatch = new IndexProgressWatch();
const indexing = new Set<string>(); // progress tokens of indexing runs (the status item's percentage)
const shown = new ShownDrafts();
let snoozeTick: NodeJS.Timeout | undefined;

function setState(next: StatusState): void {
  state = next;
  const view = statusView(state);
  statusItem.text = view.text;
  statusItem.tooltip = view.tooltip;
}

function enableSetting(): unknown {
  return vscode.workspace.getConfiguration("spd").get("enable");
}

/** The active editor's language, and whether `spd.enable` turns it off (shown in the status item). */
function refreshLanguage(): void {
  const document = vscode.window.activeTextEditor?.document;
  const language = document && { id: document.languageId, off: !enabledFor(enableSetting(), document.languageId) };
  setState(withLanguage(state, language));
}

/** An inline item as VS Code holds it, as the server served it (what the notifications carry back). */
function asServed(item: vscode.InlineCompletionItem): ServedItem {
  const position = (p: vscode.Position) => ({ line: p.line, character: p.character });
  const insertText = typeof item.insertText === "string" ? item.insertText : item.insertText.value;
  const command = item.command && { title: item.command.title, command: item.command.command, arguments: item.command.arguments };
  return { insertText, range: item.range && { start: position(item.range.start), end: position(item.range.end) }, command };
}

function notifyServer(method: string, params: unknown): void {
  const client = lifecycle.client;
  if (client?.isRunning()) {
    void client.sendNotification(method, params);
  }
}

function reportShown(item: ServedItem | undefined): void {
  if (item !== undefined) {
    notifyServer(NOTIFICATIONS.didShow, { item });
  }
}

function currentSettings() {
  const config = vscode.workspace.getConfiguration("spd");
  return toServerSettings((key) => config.get(key));
}

function workspaceFolders(): string[] {
  return (vscode.workspace.workspaceFolders ?? []).map((folder) => folder.uri.fsPath);
}

function notify(notice: Notice): void {
  const show = {
    info: (text: string) => vscode.window.showInformationMessage(text),
    warning: (text: string) => vscode.window.showWarningMessage(text),
    error: (text: string) => vscode.window.showErrorMessage(text),
  }[notice.kind];
  void show(notice.text);
}

function createClient(command: string): LanguageClient {
  const serverOptions: ServerOptions = { command, args: ["--stdio"], options: { cwd: workspaceFolders()[0] } };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file" }, { scheme: "untitled" }],
    initializationOptions: currentSettings(),
    outputChannel: output,
    middleware: {
      provideInlineCompletionItems: async (document, position, context, token, next) => {
        if (!wanted(state.control, enableSetting(), document.languageId, Date.now())) {
          return null; // off, snoozed, or not this language: the server is not asked
        }
        const started = Date.now();
        const measured = settled(state); // a request while the server warms up is no measure of latency
        const result = await next(document, position, context, token);
        if (!token.isCancellationRequested) {
          setState(recordLatency(state, Date.now() - started, measured));
          void refreshModel();
          const items = Array.isArray(result) ? result : (result?.items ?? []);
          reportShown(shown.served(items.map(asServed)));
        }
        return result;
      },
      handleWorkDoneProgress: (token, params, next) => {
        const value = params as WorkDoneValue;
        const key = String(token);
        if (value.kind === "begin" && isIndexing(value.title)) {
          indexing.add(key);
        }
        if (indexing.has(key)) {
          setState(applyProgress(state, value)); // loading and compiling show through the pushed state
          if (value.kind === "end") {
            indexing.delete(key);
          }
        }
        const notice = indexWatch.progress(token, value);
        if (notice !== undefined) {
          notify(notice);
        }
        next(token, params);
      },
    },
    // The library would also show its own error for a start this extension
    // abandoned; `startFailed` reports the current client's failures once.
    initializationFailedHandler: (error) => {
      output.appendLine(`Server initialization failed: ${error}`);
      return false;
    },
    // A crash of the current server restarts it (the library's bounded policy);
    // a server this extension replaced or stopped stays down.
    errorHandler: {
      error: (error, message, count) => crashes.error(error, message, count),
      closed: () => (lifecycle.isCurrent(client) ? crashes.closed() : { action: CloseAction.DoNotRestart, handled: true }),
    },
  };
  // The handlers above run only once the client exists.
  const client = new SpdLanguageClient("spd", "SPD", serverOptions, clientOptions);
  const crashes = client.createDefaultErrorHandler();
  client.onNotification(NOTIFICATIONS.status, (params: unknown) => {
    if (lifecycle.isCurrent(client)) {
      setState(withServer(state, params));
    }
  });
  client.onDidChangeState((event) => {
    if (!lifecycle.isCurrent(client)) {
      return;
    }
    if (event.newState === State.Running) {
      setState(withPhase(state, "ready"));
    } else if (event.newState === State.Stopped) {
      setState(withPhase(state, "stopped"));
    }
  });
  return client;
}

function activeFile(): string | undefined {
  const uri = vscode.window.activeTextEditor?.document.uri;
  return uri?.scheme === "file" ? uri.fsPath : undefined;
}

/** A client for the server found now, or undefined after telling the user what was searched. */
function clientForFoundServer(): LanguageClient | undefined {
  const configured = vscode.workspace.getConfiguration("spd").get<string>("serverPath") ?? "";
  const { command, searched } = resolveServerPath({
    configured,
    workspaceFolders: workspaceFolders(),
    activeFile: activeFile(),
    pathEnv: process.env.PATH ?? "",
    platform: process.platform,
    exists: (file) => fs.existsSync(file),
  });
  if (command === undefined) {
    const message = notFoundMessage(searched, { configured });
    setState(withPhase(state, "error", message));
    output.appendLine(message);
    void vscode.window.showErrorMessage(message, OPEN_SETTINGS).then((choice) => {
      if (choice === OPEN_SETTINGS) {
        void vscode.commands.executeCommand("workbench.action.openSettings", "spd.serverPath");
      }
    });
    return undefined;
  }
  setState({ ...withPhase(state, "starting"), server: undefined, answered: 0, lastLatencyMs: undefined });
  output.appendLine(`Starting ${command} --stdio`);
  return createClient(command);
}

function startFailed(error: unknown): void {
  setState(withPhase(state, "error", `the language server failed to start: ${error}`));
  output.appendLine(`Failed to start the language server: ${error}`);
}

async function serverCommand(command: string): Promise<unknown> {
  const client = lifecycle.client;
  if (client === undefined || !client.isRunning()) {
    throw new Error("the SPD language server is not running");
  }
  return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [] });
}

/** Shows the model and device in the status item once the server has loaded them (its first answer). */
async function refreshModel(): Promise<void> {
  if (state.model !== undefined) {
    return;
  }
  try {
    const model = modelOf(await serverCommand(SERVER_COMMANDS.status));
    if (model !== undefined) {
      setState(withModel(state, model));
    }
  } catch (error) {
    output.appendLine(`SPD: reading the model from spd.status failed: ${error}`);
  }
}

async function indexWorkspace(): Promise<void> {
  indexWatch.expect();
  try {
    const notice = indexAnswerNotice(await serverCommand(SERVER_COMMANDS.index));
    if (notice.kind !== "info") {
      indexWatch.cancel();
    }
    notify(notice);
  } catch (error) {
    indexWatch.cancel();
    notify({ kind: "error", text: `SPD: indexing could not start: ${error}` });
  }
}

async function showStatus(): Promise<void> {
  try {
    const status = await serverCommand(SERVER_COMMANDS.status);
    output.appendLine("SPD status:");
    formatStatus(status).forEach((line) => output.appendLine(`  ${line}`));
    output.show(true);
  } catch (error) {
    vscode.window.showErrorMessage(`SPD: ${error}`);
  }
}

/** SPD: Toggle: completions off until toggled on again (a snooze ends too). */
function toggle(): void {
  setState(withControl(state, toggled(state.control)));
  scheduleSnoozeTick();
  void vscode.commands.executeCommand("editor.action.inlineSuggest.hide");
  void vscode.window.showInformationMessage(`SPD: completions ${state.control.off ? "off" : "on"}`);
}

/** SPD: Snooze: no completions for a while (asks how long, from the palette). */
async function snooze(minutes?: number): Promise<void> {
  if (minutes === undefined) {
    const picked = await vscode.window.showQuickPick(SNOOZE_MINUTES.map((m) => ({ label: `${m} minutes`, minutes: m })), {
      placeHolder: "Snooze SPD completions for",
    });
    if (picked === undefined) {
      return;
    }
    minutes = picked.minutes;
  }
  setState(withControl(state, snoozed(state.control, minutes, Date.now())));
  scheduleSnoozeTick();
  void vscode.commands.executeCommand("editor.action.inlineSuggest.hide");
}

/** While a snooze runs, the status item counts its minutes down, and its end turns completions on. */
function scheduleSnoozeTick(): void {
  clearTimeout(snoozeTick);
  snoozeTick = undefined;
  const until = state.control.snoozedUntil;
  if (until === undefined) {
    return;
  }
  if (snoozeLeft(state.control, Date.now()) === undefined) {
    setState(withControl(state, { off: false }));
    return;
  }
  snoozeTick = setTimeout(scheduleSnoozeTick, Math.min(30_000, Math.max(50, until - Date.now())));
}

/** The status item's quick pick. */
async function menu(): Promise<void> {
  const picked = await vscode.window.showQuickPick(menuItems(state.control, Date.now()), { placeHolder: "SPD" });
  if (picked !== undefined) {
    await vscode.commands.executeCommand(picked.command, ...picked.args);
  }
}

/** Alt+] / Alt+[: VS Code's next/previous draft, and the draft it now shows reported. */
async function cycle(delta: number): Promise<void> {
  await vscode.commands.executeCommand(delta > 0 ? VSCODE_INLINE.showNext : VSCODE_INLINE.showPrevious);
  reportShown(shown.cycled(delta));
}

/** Ctrl+Right / Ctrl+Alt+Right: VS Code accepts a word / a line of the shown draft; the server hears how much. */
async function acceptPart(command: string): Promise<void> {
  const item = shown.current();
  const editor = vscode.window.activeTextEditor;
  await vscode.commands.executeCommand(command);
  if (item?.range === undefined || editor === undefined) {
    return;
  }
  const start = new vscode.Position(item.range.start.line, item.range.start.character);
  const length = acceptedLength(item, editor.document.getText(new vscode.Range(start, editor.selection.active)));
  if (length !== undefined) {
    notifyServer(NOTIFICATIONS.didPartiallyAccept, { item, acceptedLength: length });
  }
}

async function onConfigurationChanged(event: vscode.ConfigurationChangeEvent): Promise<void> {
  const client = lifecycle.client;
  if (event.affectsConfiguration("spd.enable")) {
    refreshLanguage();
  }
  if (event.affectsConfiguration("spd")) {
    setState(withModel(state, undefined)); // a model or device setting loads another; the next answer says which
  }
  if (event.affectsConfiguration("spd.serverPath")) {
    await lifecycle.restart();
  } else if (event.affectsConfiguration("spd") && client?.isRunning()) {
    await client.sendNotification(DidChangeConfigurationNotification.type, configurationChange(currentSettings()));
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("SPD", { log: true });
  lifecycle = new ServerLifecycle({ create: clientForFoundServer, startFailed, log: (line) => output.appendLine(line) });
  statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  statusItem.command = CLIENT_COMMANDS.menu;
  setState(initialState);
  refreshLanguage();
  statusItem.show();
  context.subscriptions.push(
    output,
    statusItem,
    vscode.commands.registerCommand(CLIENT_COMMANDS.indexWorkspace, indexWorkspace),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showStatus, showStatus),
    vscode.commands.registerCommand(CLIENT_COMMANDS.restart, () => lifecycle.restart()),
    vscode.commands.registerCommand(CLIENT_COMMANDS.toggle, toggle),
    vscode.commands.registerCommand(CLIENT_COMMANDS.snooze, snooze),
    vscode.commands.registerCommand(CLIENT_COMMANDS.menu, menu),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showNext, () => cycle(1)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showPrevious, () => cycle(-1)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.acceptNextWord, () => acceptPart(VSCODE_INLINE.acceptNextWord)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.acceptNextLine, () => acceptPart(VSCODE_INLINE.acceptNextLine)),
    vscode.workspace.onDidChangeConfiguration(onConfigurationChanged),
    vscode.window.onDidChangeActiveTextEditor(() => refreshLanguage()),
  );
  await lifecycle.restart();
}

export async function deactivate(): Promise<void> {
  clearTimeout(snoozeTick);
  await lifecycle.stop();
  setState(withPhase(state, "stopped"));
}
