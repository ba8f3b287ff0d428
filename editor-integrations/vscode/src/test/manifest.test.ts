/**
 * The settings page promises only what the server accepts: every enum value,
 * every declared bound, checked by the server's own parser
 * (spd_lsp.settings.parse_settings) and model resolver (spd_lsp.engine.model.resolve_source).
 */

import { strict as assert } from "node:assert";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { PYTHON, ROOT } from "./lspSession";

const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8"));

interface Property {
  type: string | string[];
  enum?: string[];
  minimum?: number;
  maximum?: number;
  description?: string;
  markdownDescription?: string;
}

const properties: Record<string, Property> = manifest.contributes.configuration.properties;
const skip = !fs.existsSync(PYTHON) && `no Python at ${PYTHON}`;

/** `spd.ngrams.alpha` = 1 -> { ngrams: { alpha: 1 } }, as the extension sends it. */
function settingsObject(key: string, value: unknown): Record<string, unknown> {
  const [, ...parts] = key.split(".");
  return parts.reduceRight<Record<string, unknown>>((inner, part) => ({ [part]: inner }), value as never) as never;
}

function python(script: string, input: unknown): unknown {
  const run = spawnSync(PYTHON, ["-c", script], { cwd: ROOT, input: JSON.stringify(input), encoding: "utf8", timeout: 60_000 });
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout);
}

/** The server's warnings for each settings object (an empty list: accepted). */
function serverWarnings(candidates: Record<string, unknown>[]): string[][] {
  const script = "import json, sys\nfrom spd_lsp.settings import parse_settings\nprint(json.dumps([parse_settings(c)[1] for c in json.load(sys.stdin)]))";
  return python(script, candidates) as string[][];
}

function isNumeric(property: Property): boolean {
  const types = Array.isArray(property.type) ? property.type : [property.type];
  return types.includes("integer") || types.includes("number");
}

const numeric = Object.entries(properties).filter(([, property]) => isNumeric(property));

test("every enum value and every declared bound is accepted by the server", { skip }, () => {
  const candidates: [string, unknown][] = Object.entries(properties).flatMap(([key, property]) => [
    ...(property.enum ?? []).map((value): [string, unknown] => [key, value]),
    ...[property.minimum, property.maximum].filter((bound) => bound !== undefined).map((bound): [string, unknown] => [key, bound]),
  ]);
  const warnings = serverWarnings(candidates.map(([key, value]) => settingsObject(key, value)));
  candidates.forEach(([key, value], i) => assert.deepEqual(warnings[i], [], `${key} = ${JSON.stringify(value)}`));
});

test("numeric settings declare the server's bounds: one step outside is refused by the server", { skip }, () => {
  const outside = numeric.flatMap(([key, property]) => {
    assert.ok(property.minimum !== undefined && property.maximum !== undefined, `${key} declares no minimum/maximum`);
    const step = (Array.isArray(property.type) ? property.type : [property.type]).includes("integer") ? 1 : 0.001;
    return [settingsObject(key, property.minimum! - step), settingsObject(key, property.maximum! + step)];
  });
  serverWarnings(outside).forEach((warnings, i) => assert.equal(warnings.length, 1, JSON.stringify(outside[i])));
});

test("spd.model promises only local files: the server refuses hub ids and never downloads", { skip }, () => {
  const text = properties["spd.model"].description ?? properties["spd.model"].markdownDescription ?? "";
  assert.doesNotMatch(text, /\bid\b/i);
  assert.match(text, /never downloaded/);
  const script =
    "import json, sys\nfrom spd_lsp.engine.model import ModelLoadError, resolve_source\n" +
    "try:\n    resolve_source(json.load(sys.stdin))\n    print(json.dumps('accepted'))\nexcept ModelLoadError as exc:\n    print(json.dumps(str(exc)))";
  assert.match(python(script, "HuggingFaceTB/SmolLM2-135M") as string, /never downloaded/);
});

test("spd.quantize says what README measured: int8 costs much of the bundled model's quality", () => {
  const text = properties["spd.quantize"].description ?? "";
  assert.doesNotMatch(text, /a little quality/);
  assert.match(text, /13\.3 % → 3\.3 %/);
});
