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

test("before the model is loaded, or from an unexpected status, the item names none", () => {
  assert.equal(modelOf({ model: null }), undefined);
  assert.equal(modelOf(null), undefined);
  assert.equal(modelOf({ model: { name: 3 } }), undefined);
  assert.equal(statusView(withModel(withPhase(initialState, "ready"), undefined)).text, "$(sparkle) SPD");
});
