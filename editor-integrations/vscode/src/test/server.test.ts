/**
 * Drives a server through vscode-jsonrpc's node transport, the library under
 * vscode-languageclient: first the fake server of tests/editors (always), then
 * the real `spd-lsp --stdio` with the bundled model (skipped, saying why, when
 * it is not installed).
 */

import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  InlineCompletionItem,
  InlineCompletionList,
  InlineCompletionRequest,
  InlineCompletionTriggerKind,
} from "vscode-languageserver-protocol/node";
import { SERVER_COMMANDS } from "../commands";
import { configurationChange } from "../settings";
import { formatStatus } from "../status";
import { closeSession, openSession, PYTHON, realServerMissing, REAL_SERVER, ROOT, Session } from "./lspSession";

const PREFIX = "import os\n\ndef list_python_files(root):\n    result = []\n    for dirpath, dirnames, filenames in os.walk(root):\n        for name in filenames:\n            if name.end";

async function inlineItems(session: Session, line: number, character: number): Promise<InlineCompletionItem[]> {
  const result = await session.connection.sendRequest(InlineCompletionRequest.type, {
    textDocument: { uri: session.uri },
    position: { line, character },
    context: { triggerKind: InlineCompletionTriggerKind.Invoked },
  });
  assert.ok(result, "no inline completion result");
  return Array.isArray(result) ? result : (result as InlineCompletionList).items;
}

function assertDrafts(items: InlineCompletionItem[], k: number): void {
  assert.equal(items.length, k);
  assert.equal(new Set(items.map((item) => String(item.insertText))).size, k, "drafts are not distinct");
  for (const item of items) {
    assert.equal(item.command?.command, SERVER_COMMANDS.accept);
  }
}

describe("fake server (tests/editors/fake_spd_server.py)", { skip: !fs.existsSync(PYTHON) && `no Python at ${PYTHON}` }, () => {
  let session: Session;
  before(async () => {
    session = await openSession(PYTHON, [path.join(ROOT, "tests", "editors", "fake_spd_server.py")], { k: 3 }, "x = foo");
  });
  after(() => closeSession(session));

  test("returns k inline items, each carrying spd.accept", async () => {
    const items = await inlineItems(session, 0, 7);
    assertDrafts(items, 3);
    assert.equal(items[0].insertText, "foo_alpha(x)");
    assert.deepEqual(items[0].range, { start: { line: 0, character: 4 }, end: { line: 0, character: 7 } });
  });

  test("a settings change reaches the server", async () => {
    await session.connection.sendNotification(DidChangeConfigurationNotification.type, configurationChange({ k: 2 }));
    assertDrafts(await inlineItems(session, 0, 7), 2);
  });

  test("accepting runs the item's command and status reports it", async () => {
    const [item] = await inlineItems(session, 0, 7);
    await session.connection.sendRequest(ExecuteCommandRequest.type, item.command!);
    const status = (await session.connection.sendRequest(ExecuteCommandRequest.type, { command: SERVER_COMMANDS.status, arguments: [] })) as {
      accepted: number;
      acceptedArguments: unknown[];
    };
    assert.equal(status.accepted, 1);
    assert.deepEqual(status.acceptedArguments, [item.command!.arguments]);
  });
});

describe("real server (spd-lsp --stdio, bundled model)", { skip: realServerMissing }, () => {
  let session: Session;
  const k = 3;
  before(async () => {
    session = await openSession(REAL_SERVER, ["--stdio"], { k, maxTokens: 8, ngrams: { enabled: false, index: false } }, PREFIX);
  });
  after(() => closeSession(session));

  test("returns k distinct inline items with spd.accept", { timeout: 120_000 }, async () => {
    const lines = PREFIX.split("\n");
    const items = await inlineItems(session, lines.length - 1, lines[lines.length - 1].length);
    assertDrafts(items, k);
    const status = await session.connection.sendRequest(ExecuteCommandRequest.type, { command: SERVER_COMMANDS.status, arguments: [] });
    assert.ok(status && typeof status === "object" && "model" in status, `unexpected status ${JSON.stringify(status)}`);
  });

  test("the accepted item's command reports its rank, and the output channel's lines say so", { timeout: 120_000 }, async () => {
    const lines = PREFIX.split("\n");
    const items = await inlineItems(session, lines.length - 1, lines[lines.length - 1].length);
    await session.connection.sendRequest(ExecuteCommandRequest.type, items[1].command!); // what VS Code runs on accept
    const status = (await session.connection.sendRequest(ExecuteCommandRequest.type, { command: SERVER_COMMANDS.status, arguments: [] })) as {
      drafts: { offered: number[]; accepted: number[] };
    };
    assert.equal(status.drafts.accepted[1], 1, JSON.stringify(status.drafts));
    const shown = formatStatus(status);
    assert.match(shown[0], /^Model: +\S+ on cpu, /);
    assert.ok(shown.some((line) => line.startsWith("Drafts:") && line.includes(`#2 1/${status.drafts.offered[1]}`)), shown.join("\n"));
    assert.ok(!shown.some((line) => line.includes("{")), "readable lines, not JSON");
  });
});
