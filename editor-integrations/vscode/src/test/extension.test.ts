/**
 * The extension as VS Code runs it: `activate()` with the real
 * vscode-languageclient LanguageClient (only the `vscode` module is a stub),
 * driving the fake server of tests/editors through launcher scripts that play
 * a good, a missing and a hanging `spd-lsp`.
 */

import * as stub from "./vscodeStub";
import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import * as extension from "../extension";
import { CLIENT_COMMANDS } from "../commands";
import { PYTHON, ROOT } from "./lspSession";

const FAKE_SERVER = path.join(ROOT, "tests", "editors", "fake_spd_server.py");
const WAIT_MS = 60_000;

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "spd-vscode-ext-"));
const workspace = path.join(scratch, "ws");
const pidFile = path.join(scratch, "pids");

/** A launcher standing in for `spd-lsp`: records its pid, then runs `body`. */
function launcher(name: string, body: string): string {
  const file = path.join(scratch, name);
  fs.writeFileSync(file, `#!/bin/sh\necho $$ >> '${pidFile}'\n${body}\n`, { mode: 0o755 });
  return file;
}

const goodServer = launcher("good-spd-lsp", `exec '${PYTHON}' '${FAKE_SERVER}'`);
const hangingServer = launcher("hanging-spd-lsp", "exec sleep 600");
const missingServer = path.join(scratch, "no-such-dir", "spd-lsp");

function launchedPids(): number[] {
  return fs.existsSync(pidFile) ? fs.readFileSync(pidFile, "utf8").trim().split("\n").map(Number) : [];
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function statusText(): string {
  return stub.statusItems[0]?.text ?? "";
}

async function waitFor(what: string, predicate: () => boolean | Promise<boolean>, timeoutMs = WAIT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}; status bar: ${statusText()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// The client runs once the server answered `initialize`; the fake server then pushes "warming" (the real one:
// "loading" first), and "ready" after its first answer.
const running = () => /^\$\((sparkle|flame)\) SPD/.test(statusText());
const failed = () => statusText() === "$(error) SPD";

function errorsNaming(text: string): number {
  return stub.recorded.messages.filter((message) => message.kind === "error" && message.text.includes(text)).length;
}

/** The server answers `spd.status` only when the client is really running. */
async function assertServerAnswers(): Promise<void> {
  stub.resetRecorded();
  await stub.runCommand(CLIENT_COMMANDS.showStatus);
  assert.deepEqual(stub.recorded.messages, [], "SPD: Show Status failed");
  assert.ok(stub.outputs[0].lines.some((line) => line.includes("fake-model")), "no status from the server");
}

describe("server lifecycle with the real LanguageClient", { skip: !fs.existsSync(PYTHON) && `no Python at ${PYTHON}` }, () => {
  before(async () => {
    fs.mkdirSync(workspace);
    stub.setWorkspaceFolders([workspace]);
    stub.setConfiguration({ "spd.serverPath": missingServer }, { fire: false });
    await extension.activate({ subscriptions: [] } as never);
  });
  after(async () => {
    await extension.deactivate();
    launchedPids().filter(alive).forEach((pid) => process.kill(pid));
  });

  test("a bad spd.serverPath fails visibly; fixing the setting starts the server", { timeout: WAIT_MS * 2 }, async () => {
    await waitFor("the error", failed);
    assert.deepEqual(errorsNaming(missingServer), 1, JSON.stringify(stub.recorded.messages));
    stub.setConfiguration({ "spd.serverPath": goodServer });
    await waitFor("the server to run", running);
    await assertServerAnswers();
  });

  test("SPD: Restart Server works from running and stops the old server", { timeout: WAIT_MS * 2 }, async () => {
    const before = launchedPids();
    await stub.runCommand(CLIENT_COMMANDS.restart);
    await waitFor("the server to run", running);
    await assertServerAnswers();
    assert.equal(launchedPids().length, before.length + 1);
    await waitFor("the old server to exit", () => !before.some(alive));
  });

  test("SPD: Restart Server works after a failed start (state startFailed)", { timeout: WAIT_MS * 2 }, async () => {
    stub.setConfiguration({ "spd.serverPath": missingServer });
    await waitFor("the error", failed);
    stub.setConfiguration({ "spd.serverPath": goodServer }, { fire: false });
    await stub.runCommand(CLIENT_COMMANDS.restart);
    await waitFor("the server to run", running);
    await assertServerAnswers();
  });

  test("a server that never answers initialize (state starting) is replaced and killed", { timeout: WAIT_MS * 2 }, async () => {
    stub.setConfiguration({ "spd.serverPath": hangingServer });
    await waitFor("the hanging server to launch", () => statusText() === "$(loading~spin) SPD" && launchedPids().some(alive));
    const hanging = launchedPids().at(-1)!;
    stub.setConfiguration({ "spd.serverPath": goodServer }, { fire: false });
    await stub.runCommand(CLIENT_COMMANDS.restart);
    await waitFor("the server to run", running);
    await assertServerAnswers();
    await waitFor("the hanging server to be killed", () => !alive(hanging));
  });

  test("a missing server gives one error naming every place searched", { timeout: WAIT_MS * 2 }, async () => {
    const emptyBin = path.join(scratch, "empty-bin");
    fs.mkdirSync(emptyBin, { recursive: true });
    const savedPath = process.env.PATH;
    process.env.PATH = emptyBin;
    try {
      stub.resetRecorded();
      stub.setConfiguration({ "spd.serverPath": "" });
      await waitFor("the error", failed);
      await waitFor("the message", () => stub.recorded.messages.length > 0);
      const [message, ...others] = stub.recorded.messages;
      assert.deepEqual(others, []);
      assert.equal(message.kind, "error");
      for (const place of [".venv/bin/spd-lsp", "venv/bin/spd-lsp"].map((tail) => path.join(workspace, tail))) {
        assert.ok(message.text.includes(place), `${place} not in: ${message.text}`);
      }
      assert.ok(message.text.includes(path.join(emptyBin, "spd-lsp")), message.text);
    } finally {
      process.env.PATH = savedPath;
      stub.setConfiguration({ "spd.serverPath": goodServer });
      await waitFor("the server to run", running);
    }
  });

  test("SPD: Index Workspace says the indexing started, and its end says how it went", { timeout: WAIT_MS * 2 }, async () => {
    stub.resetRecorded();
    await stub.runCommand(CLIENT_COMMANDS.indexWorkspace);
    await waitFor("the end of indexing", () => stub.recorded.messages.length >= 2);
    const texts = stub.recorded.messages.map((message) => message.text);
    assert.ok(!texts.some((text) => /index updated/i.test(text)), texts.join(" | "));
    assert.ok(texts.some((text) => /indexing started/.test(text)), texts.join(" | "));
    assert.ok(texts.some((text) => /Indexing workspace finished: 3 files, 120 tokens/.test(text)), texts.join(" | "));
  });

  test("drafts are asked only where wanted; the drawn draft and the pushed status reach the server and the item", { timeout: WAIT_MS * 2 }, async () => {
    await waitFor("the server to run", running);
    const file = path.join(workspace, "events.py");
    fs.writeFileSync(file, "x = foo\n");
    const document = { uri: stub.Uri.file(file), languageId: "python", version: 1, getText: () => "x = foo\n" };
    const ask = async () => {
      const provider = stub.inlineProviders.at(-1)!;
      const token = new stub.CancellationTokenSource().token;
      const answer = (await provider.provideInlineCompletionItems(document, new stub.Position(0, 7), { triggerKind: 1 }, token)) as
        { items: { insertText: string }[] } | { insertText: string }[] | null;
      return answer === null ? null : Array.isArray(answer) ? answer : answer.items;
    };
    const serverRequests = async () => ((await stub.runCommand("spd.status")) as { requests: number }).requests;
    const seen = async () => (await stub.runCommand("fake.seen")) as { shownItems: { item: { insertText: string } }[] };
    assert.equal(stub.statusItems[0].command, CLIENT_COMMANDS.menu, "a click opens the menu");

    assert.equal(statusText(), "$(flame) SPD warming up");
    const first = await ask();
    assert.equal(first?.length, 3);
    await waitFor("the server's ready", () => statusText().startsWith("$(sparkle) SPD"));
    assert.doesNotMatch(statusText(), / ms$/, "no latency figure from a request made while warming up");
    await ask();
    await waitFor("a latency figure", () => / \d+ ms$/.test(statusText()));
    await waitFor("the drawn drafts reported", async () => (await seen()).shownItems.length >= 2);

    // Off, snoozed, or the language off: no request reaches the server.
    const asked = await serverRequests();
    await stub.runCommand(CLIENT_COMMANDS.toggle);
    assert.equal(statusText(), "$(eye-closed) SPD off");
    assert.equal(await ask(), null);
    await stub.runCommand(CLIENT_COMMANDS.toggle);
    stub.quickPickAnswers.push((items) => items[0]); // SPD: Snooze from the palette: 5 minutes
    await stub.runCommand(CLIENT_COMMANDS.snooze);
    assert.equal(statusText(), "$(watch) SPD snoozed 5m");
    assert.equal(await ask(), null);
    stub.quickPickAnswers.push((items) => (items as { label: string }[]).find((item) => /Turn completions on/.test(item.label)));
    await stub.runCommand(CLIENT_COMMANDS.menu); // the status item's menu ends it
    assert.ok(statusText().startsWith("$(sparkle) SPD"), statusText());
    stub.setConfiguration({ "spd.enable": { "*": true, python: false } });
    assert.equal(await ask(), null);
    stub.setConfiguration({ "spd.enable": undefined });
    assert.equal(await serverRequests(), asked, "nothing was asked while off");
    assert.equal((await ask())?.length, 3);

    // Alt+] runs VS Code's own next-draft command, and reports the draft it lands on.
    const shownBefore = (await seen()).shownItems.length;
    await stub.runCommand(CLIENT_COMMANDS.showNext);
    assert.ok(stub.builtinCommands.includes("editor.action.inlineSuggest.showNext"));
    await waitFor("the cycled draft reported", async () => (await seen()).shownItems.length > shownBefore);
    const shown = (await seen()).shownItems;
    assert.equal(shown[shown.length - 1].item.insertText, "foo_beta(y, z)");
  });

  test("SPD: Restart Server works from stopped", { timeout: WAIT_MS * 2 }, async () => {
    await extension.deactivate();
    await waitFor("the stop", () => statusText() === "$(circle-slash) SPD");
    await stub.runCommand(CLIENT_COMMANDS.restart);
    await waitFor("the server to run", running);
    await assertServerAnswers();
  });
});
