import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { configurationChange, toServerSettings } from "../settings";

const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8"));
const properties: Record<string, { default: unknown }> = manifest.contributes.configuration.properties;

/** A getter over `spd.*` as VS Code would answer it: overrides, else the manifest's defaults. */
function getter(overrides: Record<string, unknown> = {}) {
  return (key: string) => (key in overrides ? overrides[key] : properties[`spd.${key}`]?.default);
}

test("manifest defaults become the server's defaults, unset values left out", () => {
  assert.deepEqual(toServerSettings(getter()), {
    k: 3,
    maxTokens: 10,
    decoding: "superposed",
    device: "auto",
    dtype: "auto",
    quantize: "none",
    fastPath: true,
    outputWeights: "q8",
    verify: "cut",
    engine: "auto",
    engineStandby: true,
    promptFormat: "auto",
    ngrams: { enabled: true, index: true, exclude: [], secretFilter: true },
    context: { snippets: false, header: false, tokens: 256, suffixTokens: 128, sources: ["open", "edited", "workspace"] },
  });
});

test("every key of the server contract is a contributed setting and is forwarded", () => {
  const overrides: Record<string, unknown> = {
    k: 5, maxTokens: 16, decoding: "beam", temperature: 0.7, model: "/models/x.gguf", device: "cpu",
    dtype: "float32", quantize: "int8", fastPath: false, outputWeights: "float", maxPrefixTokens: 512, multiline: "auto", multilineMaxTokens: 40,
    verify: "continue", engine: "tcp://127.0.0.1:7000", engineTokenFile: "/tmp/token", engineCertificate: "/tmp/cert.pem", engineStandby: false,
    exclude: [".env*"], "ngrams.enabled": false, "ngrams.orders": [2, 3], "ngrams.weights": { "2": 0.5, "3": 0.5 },
    "ngrams.alpha": 0.3, "ngrams.db": "/tmp/db", "ngrams.index": false, "ngrams.exclude": ["*.min.js"],
    "ngrams.secretFilter": false, promptFormat: "qwen", "context.snippets": true, "context.header": true, "context.tokens": 64,
    "context.suffixTokens": 32, "context.sources": ["open"],
  };
  for (const key of Object.keys(overrides)) {
    assert.ok(`spd.${key}` in properties, `spd.${key} missing from package.json`);
  }
  assert.deepEqual(toServerSettings(getter(overrides)), {
    k: 5, maxTokens: 16, decoding: "beam", temperature: 0.7, model: "/models/x.gguf", device: "cpu",
    dtype: "float32", quantize: "int8", fastPath: false, outputWeights: "float", maxPrefixTokens: 512, multiline: "auto", multilineMaxTokens: 40,
    verify: "continue", engine: "tcp://127.0.0.1:7000", engineTokenFile: "/tmp/token", engineCertificate: "/tmp/cert.pem", engineStandby: false,
    promptFormat: "qwen", exclude: [".env*"],
    ngrams: { enabled: false, orders: [2, 3], weights: { "2": 0.5, "3": 0.5 }, alpha: 0.3, db: "/tmp/db", index: false, exclude: ["*.min.js"],
      secretFilter: false },
    context: { snippets: true, header: true, tokens: 64, suffixTokens: 32, sources: ["open"] },
  });
});

test("client-only settings are never sent to the server", () => {
  const settings = toServerSettings(getter({ serverPath: "/usr/bin/spd-lsp", enable: { "*": false } }));
  assert.ok(!("serverPath" in settings) && !("enable" in settings));
});

test("didChangeConfiguration nests the settings under spd", () => {
  assert.deepEqual(configurationChange({ k: 2 }), { settings: { spd: { k: 2 } } });
});
