import { strict as assert } from "node:assert";
import { test } from "node:test";
import { initialState, modelOf, recordLatency, statusView, withModel, withPhase } from "../status";

test("the status item names the loaded model and its device", () => {
  const model = modelOf({ model: { name: "SmolLM2-135M-Instruct", device: "cpu", dtype: "float32" }, requests: 1 });
  assert.deepEqual(model, { name: "SmolLM2-135M-Instruct", device: "cpu" });
  const state = recordLatency(withModel(withPhase(initialState, "ready"), model), 812);
  assert.equal(statusView(state).text, "$(sparkle) SPD SmolLM2-135M-Instruct · cpu 812 ms");
  assert.equal(statusView(state).tooltip, "SPD: last completion took 812 ms (SmolLM2-135M-Instruct on cpu); click for the SPD menu");
});

test("the status item says which engine serves: the shared one (the default) or this server", () => {
  const shared = modelOf({ model: { name: "SmolLM2-135M-Instruct", device: "cpu", engineKind: "shared" } });
  assert.deepEqual(shared, { name: "SmolLM2-135M-Instruct", device: "cpu", engine: "shared" });
  const state = recordLatency(withModel(withPhase(initialState, "ready"), shared), 90);
  assert.equal(statusView(state).text, "$(sparkle) SPD SmolLM2-135M-Instruct · cpu · shared 90 ms");
  assert.match(statusView(state).tooltip, /served by the shared engine \(one model for every window\)/);
  const inProcess = withModel(withPhase(initialState, "ready"), modelOf({ model: { name: "m", device: "cpu", engineKind: "in-process" } }));
  assert.equal(statusView(inProcess).text, "$(sparkle) SPD m · cpu");
  assert.match(statusView(inProcess).tooltip, /in this server's process/);
});

test("before the model is loaded, or from an unexpected status, the item names none", () => {
  assert.equal(modelOf({ model: null }), undefined);
  assert.equal(modelOf(null), undefined);
  assert.equal(modelOf({ model: { name: 3 } }), undefined);
  assert.equal(statusView(withModel(withPhase(initialState, "ready"), undefined)).text, "$(sparkle) SPD");
});
