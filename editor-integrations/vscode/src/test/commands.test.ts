import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { CLIENT_COMMANDS, SERVER_COMMANDS } from "../commands";

const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8"));
const contributed: { command: string; title: string; category: string }[] = manifest.contributes.commands;

test("the palette shows SPD: Index Workspace and SPD: Show Status", () => {
  const titles = new Map(contributed.map((c) => [c.command, `${c.category}: ${c.title}`]));
  assert.equal(titles.get(CLIENT_COMMANDS.indexWorkspace), "SPD: Index Workspace");
  assert.equal(titles.get(CLIENT_COMMANDS.showStatus), "SPD: Show Status");
  assert.deepEqual([...titles.keys()].sort(), Object.values(CLIENT_COMMANDS).sort());
});

test("client command ids never clash with the server's, which the client registers itself", () => {
  const serverIds = new Set<string>(Object.values(SERVER_COMMANDS));
  for (const id of Object.values(CLIENT_COMMANDS)) {
    assert.ok(!serverIds.has(id), id);
  }
});
