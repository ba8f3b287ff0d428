/**
 * What the .vsix carries (`vsce ls`, the list `vsce package` packs): the manifest,
 * the Marketplace page (README, CHANGELOG, icon, LICENSE) and the bundled extension;
 * never sources, tests, maps, node_modules (bundled), build or test leftovers.
 * And the manifest fields the Marketplace shows.
 */

import { strict as assert } from "node:assert";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";

const ROOT = path.join(__dirname, "..", "..");
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));

function packagedFiles(): string[] {
  const vsce = path.join(ROOT, "node_modules", ".bin", "vsce");
  const run = spawnSync(vsce, ["ls"], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });
  assert.equal(run.status, 0, run.stderr);
  return run.stdout.split("\n").filter((line) => line.trim() !== "");
}

test("the package holds the page and the bundled extension only", () => {
  const files = packagedFiles().sort();
  // dist/extension.js: esbuild's bundle of out/'s sources and vscode-languageclient (`npm run bundle`).
  assert.deepEqual(files, ["CHANGELOG.md", "LICENSE", "README.md", "dist/extension.js", "images/icon.png", "package.json"]);
  assert.equal(manifest.main, "./dist/extension.js");
  assert.match(manifest.scripts["vscode:prepublish"], /npm run bundle/);
});

test("the manifest has what the Marketplace page shows", () => {
  assert.ok(fs.statSync(path.join(ROOT, manifest.icon)).size > 0, "icon");
  const png = fs.readFileSync(path.join(ROOT, manifest.icon));
  assert.equal(png.subarray(1, 4).toString(), "PNG");
  assert.ok(png.readUInt32BE(16) >= 128 && png.readUInt32BE(20) >= 128, "the icon is at least 128x128");
  assert.ok(manifest.repository?.url && manifest.galleryBanner?.color && manifest.keywords?.length > 0);
  assert.ok(manifest.categories.includes("AI"), JSON.stringify(manifest.categories));
  // vscode-languageclient declares the VS Code it needs; the extension asks for no less.
  const client = JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", "vscode-languageclient", "package.json"), "utf8"));
  assert.equal(manifest.engines.vscode, client.engines.vscode);
  // @types/vscode is the API the code is compiled against: not newer than the engine.
  const types = JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", "@types", "vscode", "package.json"), "utf8"));
  assert.equal(types.version.split(".").slice(0, 2).join("."), manifest.engines.vscode.replace(/^\^/, "").split(".").slice(0, 2).join("."));
});

test("the README documents every setting and every command", () => {
  const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8");
  const missing = [
    ...Object.keys(manifest.contributes.configuration.properties),
    ...manifest.contributes.commands.flatMap((command: { command: string; title: string; category: string }) => [
      command.command,
      `${command.category}: ${command.title}`,
    ]),
  ].filter((name) => !readme.includes(`\`${name}\``) && !readme.includes(name));
  assert.deepEqual(missing, []);
});
