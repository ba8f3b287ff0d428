import { strict as assert } from "node:assert";
import { test } from "node:test";
import { acceptedLength, ShownDrafts } from "../shown";
import { initialState, recordLatency, settled, statusView, withControl, withLanguage, withPhase, withServer } from "../status";
import { snoozed } from "../control";

const item = (text: string, rank: number) => ({
  insertText: text,
  range: { start: { line: 3, character: 0 }, end: { line: 3, character: 4 } },
  command: { title: "Accept", command: "spd.accept", arguments: ["file:///a.py", rank, text.slice(4), 7] },
});

test("the first item of an answer is the one drawn; Alt+] and Alt+[ cycle in rank order", () => {
  const drafts = new ShownDrafts();
  const items = [item("x = a()", 0), item("x = b()", 1), item("x = c()", 2)];
  assert.equal(drafts.served(items), items[0]);
  assert.equal(drafts.cycled(1), items[1]);
  assert.equal(drafts.cycled(1), items[2]);
  assert.equal(drafts.cycled(1), items[0]);
  assert.equal(drafts.cycled(-1), items[2]);
  assert.equal(drafts.current(), items[2]);
  assert.equal(drafts.served([]), undefined);
  assert.equal(drafts.cycled(1), undefined);
});

test("acceptedLength counts UTF-16 units from the item's start, Copilot's way", () => {
  const emoji = item("x = 😀(a, b)", 0);
  assert.equal(acceptedLength(emoji, "x = 😀"), 6);
  assert.equal(acceptedLength(emoji, "x = q"), undefined, "the user typed something else");
  assert.equal(acceptedLength(emoji, ""), undefined);
});

test("the status item: loading, warming up (no latency from it), ready with the latency of a settled request", () => {
  let state = withPhase(initialState, "ready");
  state = withServer(state, { state: "loading", message: "loading the bundled model", kind: "Normal", busy: true, model: null });
  assert.equal(statusView(state).text, "$(loading~spin) SPD loading");
  state = withServer(state, { state: "warming", message: "the first completion prefills the prompt", model: { name: "m", device: "cpu" } });
  assert.equal(statusView(state).text, "$(flame) SPD warming up");
  assert.equal(settled(state), false);
  state = recordLatency(state, 12_663, settled(state)); // the first request: the cold prompt, not typing latency
  state = withServer(state, { state: "ready", message: "ready", model: { name: "m", device: "cpu" } });
  assert.equal(statusView(state).text, "$(sparkle) SPD m · cpu", "no latency figure before a settled request");
  state = recordLatency(state, 183, settled(state));
  assert.equal(statusView(state).text, "$(sparkle) SPD m · cpu 183 ms");
  state = withServer(state, { state: "error", message: "the model could not be loaded" });
  assert.equal(statusView(state).text, "$(error) SPD");
  assert.match(statusView(state).tooltip, /could not be loaded/);
  assert.equal(withServer(state, { nonsense: true }), state, "a malformed push changes nothing");
});

test("a server that pushes no status is settled after its first answer", () => {
  let state = withPhase(initialState, "ready");
  state = recordLatency(state, 9_000, settled(state));
  assert.equal(statusView(state).text, "$(sparkle) SPD");
  state = recordLatency(state, 150, settled(state));
  assert.equal(statusView(state).text, "$(sparkle) SPD 150 ms");
});

test("off, snoozed and a language turned off show first while the client runs", () => {
  const now = 100_000;
  const ready = withServer(withPhase(initialState, "ready"), { state: "ready", model: { name: "m", device: "cpu" } });
  assert.equal(statusView(withControl(ready, { off: true }), now).text, "$(eye-closed) SPD off");
  assert.equal(statusView(withControl(ready, snoozed(ready.control, 15, now)), now + 60_000).text, "$(watch) SPD snoozed 14m");
  assert.equal(statusView(withLanguage(ready, { id: "markdown", off: true }), now).text, "$(eye-closed) SPD off for markdown");
  assert.equal(statusView(withLanguage(ready, { id: "python", off: false }), now).text, "$(sparkle) SPD m · cpu");
  assert.equal(statusView(withControl(withPhase(ready, "stopped"), { off: true }), now).text, "$(circle-slash) SPD",
    "a stopped server says so whatever the user chose");
});
