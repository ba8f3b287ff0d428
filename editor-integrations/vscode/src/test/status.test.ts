import { strict as assert } from "node:assert";
import { test } from "node:test";
import { applyProgress, formatStatus, initialState, recordLatency, statusView, withPhase } from "../status";

test("indexing progress shows in the status bar and clears at the end", () => {
  let state = withPhase(initialState, "ready");
  state = applyProgress(state, { kind: "begin", title: "Indexing workspace", percentage: 0 });
  assert.equal(statusView(state).text, "$(sync~spin) SPD 0%");
  state = applyProgress(state, { kind: "report", message: "2/3 files", percentage: 66.6 });
  assert.equal(statusView(state).text, "$(sync~spin) SPD 67%");
  assert.equal(statusView(state).tooltip, "SPD: Indexing workspace (2/3 files)");
  state = applyProgress(state, { kind: "end", message: "done" });
  assert.equal(statusView(state).text, "$(sparkle) SPD");
});

test("the last completion latency is shown once known", () => {
  const state = recordLatency(withPhase(initialState, "ready"), 183.4);
  assert.equal(statusView(state).text, "$(sparkle) SPD 183 ms");
  assert.match(statusView(state).tooltip, /183 ms/);
});

test("errors and stops are visible", () => {
  const failed = withPhase(initialState, "error", "spd-lsp not found");
  assert.equal(statusView(failed).text, "$(error) SPD");
  assert.equal(statusView(failed).tooltip, "SPD: spd-lsp not found");
  assert.equal(statusView(withPhase(failed, "stopped")).text, "$(circle-slash) SPD");
});

test("status objects flatten into readable lines", () => {
  assert.deepEqual(formatStatus({ model: "m", store: { files: 3, path: "/p" }, latency: { p50_ms: 12 }, orders: [2, 3] }), [
    "model: m",
    "store.files: 3",
    "store.path: /p",
    "latency.p50_ms: 12",
    "orders: [2,3]",
  ]);
  assert.deepEqual(formatStatus(null), ["status: null"]);
});

test("a server's summary is shown as its own lines, not flattened", () => {
  const summary = "Model:    m on cpu, float32, eager\nEngine:   in-process (the model runs in this server)\n";
  assert.deepEqual(formatStatus({ model: { name: "m" }, drafts: { offered: [1], accepted: [0] }, summary }), [
    "Model:    m on cpu, float32, eager",
    "Engine:   in-process (the model runs in this server)",
  ]);
});
