/**
 * VS Code glue: start `spd-lsp --stdio`, forward settings, show status and
 * latency, and wire the commands. Inline completions themselves are
 * vscode-languageclient's built-in `textDocument/inlineCompletion` feature; the
 * `spd.accept` command on each item is registered by the client from the
 * server's `executeCommandProvider`, so accepting a draft reports it.
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
import { CLIENT_COMMANDS, SERVER_COMMANDS } from "./commands";
import { IndexProgressWatch, indexAnswerNotice, Notice } from "./indexing";
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
  StatusState,
  statusView,
  WorkDoneValue,
  withModel,
  withPhase,
} from "./status";

const OPEN_SETTINGS = "Open Settings";

let lifecycle: ServerLifecycle<LanguageClient>;
let state: StatusState = initialState;
let statusItem: vscode.StatusBarItem;
let output: vscode.LogOutputChannel;
const indexWatch = new IndexProgressWatch();

function setState(next: StatusState): void {
  state = next;
  const view = statusView(state);
  statusItem.text = view.text;
  statusItem.tooltip = view.tooltip;
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
        const started = Date.now();
        const result = await next(document, position, context, token);
        if (!token.isCancellationRequested) {
          setState(recordLatency(state, Date.now() - started));
          void refreshModel();
        }
        return result;
      },
      handleWorkDoneProgress: (token, params, next) => {
        const value = params as WorkDoneValue;
        setState(applyProgress(state, value));
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
  setState(withPhase(state, "starting"));
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

async function onConfigurationChanged(event: vscode.ConfigurationChangeEvent): Promise<void> {
  const client = lifecycle.client;
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
  statusItem.command = CLIENT_COMMANDS.showStatus;
  setState(initialState);
  statusItem.show();
  context.subscriptions.push(
    output,
    statusItem,
    vscode.commands.registerCommand(CLIENT_COMMANDS.indexWorkspace, indexWorkspace),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showStatus, showStatus),
    vscode.commands.registerCommand(CLIENT_COMMANDS.restart, () => lifecycle.restart()),
    vscode.workspace.onDidChangeConfiguration(onConfigurationChanged),
  );
  await lifecycle.restart();
}

export async function deactivate(): Promise<void> {
  await lifecycle.stop();
  setState(withPhase(state, "stopped"));
}
