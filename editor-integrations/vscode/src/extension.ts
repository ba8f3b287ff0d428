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
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
} from "vscode-languageclient/node";
import { CLIENT_COMMANDS, SERVER_COMMANDS } from "./commands";
import { resolveServerPath } from "./serverPath";
import { configurationChange, toServerSettings } from "./settings";
import { applyProgress, formatStatus, initialState, recordLatency, StatusState, statusView, WorkDoneValue, withPhase } from "./status";

let client: LanguageClient | undefined;
let state: StatusState = initialState;
let statusItem: vscode.StatusBarItem;
let output: vscode.LogOutputChannel;

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
        }
        return result;
      },
      handleWorkDoneProgress: (token, params, next) => {
        setState(applyProgress(state, params as WorkDoneValue));
        next(token, params);
      },
    },
  };
  const created = new LanguageClient("spd", "SPD", serverOptions, clientOptions);
  created.onDidChangeState((event) => {
    if (event.newState === State.Running) {
      setState(withPhase(state, "ready"));
    } else if (event.newState === State.Stopped) {
      setState(withPhase(state, "stopped"));
    }
  });
  return created;
}

async function startClient(): Promise<void> {
  const command = resolveServerPath({
    configured: vscode.workspace.getConfiguration("spd").get<string>("serverPath") ?? "",
    workspaceFolders: workspaceFolders(),
    pathEnv: process.env.PATH ?? "",
    platform: process.platform,
    exists: (file) => fs.existsSync(file),
  });
  if (command === undefined) {
    const message = "spd-lsp not found: install it (pip install -e .) or set spd.serverPath";
    setState(withPhase(state, "error", message));
    const choice = await vscode.window.showWarningMessage(message, "Open Settings");
    if (choice) {
      await vscode.commands.executeCommand("workbench.action.openSettings", "spd.serverPath");
    }
    return;
  }
  setState(withPhase(state, "starting"));
  client = createClient(command);
  try {
    await client.start();
  } catch (error) {
    setState(withPhase(state, "error", String(error)));
    output.appendLine(`Failed to start ${command}: ${error}`);
  }
}

async function stopClient(): Promise<void> {
  const running = client;
  client = undefined;
  await running?.stop();
}

async function serverCommand(command: string): Promise<unknown> {
  if (client === undefined || !client.isRunning()) {
    throw new Error("the SPD language server is not running");
  }
  return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [] });
}

async function indexWorkspace(): Promise<void> {
  try {
    const report = await serverCommand(SERVER_COMMANDS.index);
    vscode.window.showInformationMessage(`SPD: index updated. ${formatStatus(report).join(", ")}`);
  } catch (error) {
    vscode.window.showErrorMessage(`SPD: indexing failed: ${error}`);
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
  if (event.affectsConfiguration("spd.serverPath")) {
    await stopClient();
    await startClient();
  } else if (event.affectsConfiguration("spd") && client?.isRunning()) {
    await client.sendNotification(DidChangeConfigurationNotification.type, configurationChange(currentSettings()));
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("SPD", { log: true });
  statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  statusItem.command = CLIENT_COMMANDS.showStatus;
  setState(initialState);
  statusItem.show();
  context.subscriptions.push(
    output,
    statusItem,
    vscode.commands.registerCommand(CLIENT_COMMANDS.indexWorkspace, indexWorkspace),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showStatus, showStatus),
    vscode.commands.registerCommand(CLIENT_COMMANDS.restart, async () => {
      await stopClient();
      await startClient();
    }),
    vscode.workspace.onDidChangeConfiguration(onConfigurationChanged),
  );
  await startClient();
}

export function deactivate(): Promise<void> {
  return stopClient();
}
