/**
 * A server session over vscode-jsonrpc's node transport (the library under
 * vscode-languageclient), for tests that talk LSP to the fake or the real server.
 */

import { ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import {
  createProtocolConnection,
  DidOpenTextDocumentNotification,
  InitializeRequest,
  ProtocolConnection,
  StreamMessageReader,
  StreamMessageWriter,
  WorkDoneProgressCreateRequest,
} from "vscode-languageserver-protocol/node";
import { ServerSettings } from "../settings";

export const ROOT = path.resolve(__dirname, "..", "..", "..", "..");
export const PYTHON = process.env.SPD_TEST_PYTHON ?? path.join(ROOT, ".venv", "bin", "python");
export const REAL_SERVER = process.env.SPD_LSP_SERVER ?? path.join(ROOT, ".venv", "bin", "spd-lsp");

/** Why the real server cannot be tested here, or false. */
export const realServerMissing = !fs.existsSync(REAL_SERVER)
  ? `real server not installed at ${REAL_SERVER}`
  : !fs.existsSync(path.join(ROOT, "spd_lsp", "commands", "serve.py")) && "spd_lsp/commands/serve.py not written yet";

export interface Session {
  process: ChildProcess;
  connection: ProtocolConnection;
  uri: string;
}

export async function openSession(command: string, args: string[], settings: ServerSettings, text: string): Promise<Session> {
  const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "spd-vscode-test-"));
  const file = path.join(workspace, "walk.py");
  fs.writeFileSync(file, text);
  const child = spawn(command, args, { cwd: workspace, stdio: ["pipe", "pipe", "inherit"] });
  const connection = createProtocolConnection(new StreamMessageReader(child.stdout!), new StreamMessageWriter(child.stdin!));
  connection.onRequest(WorkDoneProgressCreateRequest.type, () => undefined);
  connection.onRequest("workspace/configuration", (params: { items: unknown[] }) => params.items.map(() => ({ ...settings })));
  connection.listen();
  const root = pathToFileURL(workspace).toString();
  await connection.sendRequest(InitializeRequest.type, {
    processId: process.pid,
    rootUri: root,
    workspaceFolders: [{ uri: root, name: "ws" }],
    initializationOptions: settings,
    capabilities: { window: { workDoneProgress: true }, textDocument: { inlineCompletion: { dynamicRegistration: false } } },
  });
  await connection.sendNotification("initialized", {});
  const uri = pathToFileURL(file).toString();
  await connection.sendNotification(DidOpenTextDocumentNotification.type, {
    textDocument: { uri, languageId: "python", version: 1, text },
  });
  return { process: child, connection, uri };
}

export async function closeSession(session: Session): Promise<void> {
  await session.connection.sendRequest("shutdown");
  await session.connection.sendNotification("exit");
  session.connection.dispose();
  session.process.kill();
}

