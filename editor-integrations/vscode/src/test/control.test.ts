import { strict as assert } from "node:assert";
import { test } from "node:test";
import { enabledFor, initialControl, snoozed, snoozeLeft, toggled, wanted } from "../control";
import { menuItems } from "../menu";
import { CLIENT_COMMANDS } from "../commands";

test("spd.enable: a boolean for every language, or a map whose language entry, else '*', decides", () => {
  assert.equal(enabledFor({ "*": true }, "python"), true);
  assert.equal(enabledFor({ "*": true, markdown: false }, "markdown"), false);
  assert.equal(enabledFor({ "*": false, python: true }, "python"), true);
  assert.equal(enabledFor({ "*": false, python: true }, "go"), false);
  assert.equal(enabledFor(false, "python"), false);
  assert.equal(enabledFor({ python: "yes" }, "python"), true, "a value that is no boolean counts as unsaid");
  assert.equal(enabledFor(undefined, "python"), true);
  assert.equal(enabledFor(["python"], "go"), true, "a malformed setting turns nothing off");
});

test("toggle and snooze: off until toggled on, or for some minutes", () => {
  const now = 1_000_000;
  const off = toggled(initialControl);
  assert.deepEqual(off, { off: true });
  assert.equal(wanted(off, { "*": true }, "python", now), false);
  assert.deepEqual(toggled(off), { off: false });
  const napping = snoozed(initialControl, 15, now);
  assert.equal(snoozeLeft(napping, now), 15);
  assert.equal(snoozeLeft(napping, now + 14 * 60_000 + 1), 1);
  assert.equal(wanted(napping, true, "python", now + 60_000), false);
  assert.equal(wanted(napping, true, "python", now + 15 * 60_000), true, "the snooze ends by itself");
  assert.deepEqual(toggled(napping), { off: false }, "toggling a snooze turns completions on");
  assert.deepEqual(snoozed(napping, 0, now), { off: false }, "0 minutes ends a snooze");
  assert.equal(wanted(initialControl, { "*": true, markdown: false }, "markdown", now), false);
});

test("the status item's menu offers on/off, the snoozes and the other commands", () => {
  const now = 5_000;
  const on = menuItems(initialControl, now);
  assert.deepEqual(on.map((item) => item.command), [CLIENT_COMMANDS.toggle, CLIENT_COMMANDS.snooze, CLIENT_COMMANDS.snooze,
    CLIENT_COMMANDS.snooze, CLIENT_COMMANDS.showStatus, CLIENT_COMMANDS.indexWorkspace, CLIENT_COMMANDS.restart]);
  assert.match(on[0].label, /Turn completions off/);
  assert.deepEqual(on.slice(1, 4).map((item) => item.args), [[5], [15], [60]]);
  const napping = menuItems(snoozed(initialControl, 5, now), now);
  assert.match(napping[0].label, /Turn completions on/);
  assert.equal(napping[0].description, "snoozed for 5 more min");
});
