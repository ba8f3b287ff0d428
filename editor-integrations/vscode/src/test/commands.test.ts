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
  assert.equal(titles.get(CLIENT_COMMANDS.toggle), "SPD: Toggle");
  assert.equal(titles.get(CLIENT_COMMANDS.snooze), "SPD: Snooze");
  assert.deepEqual([...titles.keys()].sort(), Object.values(CLIENT_COMMANDS).sort());
});

test("client command ids never clash with the server's, which the client registers itself", () => {
  const serverIds = new Set<string>(Object.values(SERVER_COMMANDS));
  for (const id of Object.values(CLIENT_COMMANDS)) {
    assert.ok(!serverIds.has(id), id);
  }
});

test("the inline-suggestion keys run the extension's wrappers, hidden from the palette", () => {
  const hidden = new Set(manifest.contributes.menus.commandPalette.filter((m: { when: string }) => m.when === "false")
    .map((m: { command: string }) => m.command));
  const keys = new Map(manifest.contributes.keybindings.map((k: { command: string; key: string }) => [k.command, k.key]));
  for (const [command, key] of [[CLIENT_COMMANDS.showNext, "alt+]"], [CLIENT_COMMANDS.showPrevious, "alt+["],
    [CLIENT_COMMANDS.acceptNextWord, "ctrl+right"], [CLIENT_COMMANDS.acceptNextLine, "ctrl+alt+right"]]) {
    assert.equal(keys.get(command), key, command);
    assert.ok(hidden.has(command), command);
  }
});
