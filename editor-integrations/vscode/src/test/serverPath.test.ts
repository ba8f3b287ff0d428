import { strict as assert } from "node:assert";
import { test } from "node:test";
import { resolveServerPath, ResolveInput } from "../serverPath";

function input(overrides: Partial<ResolveInput>, existing: string[] = []): ResolveInput {
  return {
    configured: "",
    workspaceFolders: ["/ws"],
    pathEnv: "/usr/local/bin:/usr/bin",
    platform: "linux",
    exists: (file) => existing.includes(file),
    ...overrides,
  };
}

test("a configured path wins and ${workspaceFolder} is expanded", () => {
  assert.equal(resolveServerPath(input({ configured: "${workspaceFolder}/env/bin/spd-lsp" })), "/ws/env/bin/spd-lsp");
  assert.equal(resolveServerPath(input({ configured: "tools/spd-lsp" })), "/ws/tools/spd-lsp");
});

test("the workspace's virtual environment comes before PATH", () => {
  const found = resolveServerPath(input({}, ["/usr/bin/spd-lsp", "/ws/.venv/bin/spd-lsp"]));
  assert.equal(found, "/ws/.venv/bin/spd-lsp");
});

test("falls back to PATH, then to undefined", () => {
  assert.equal(resolveServerPath(input({}, ["/usr/bin/spd-lsp"])), "/usr/bin/spd-lsp");
  assert.equal(resolveServerPath(input({}, [])), undefined);
});

test("Windows uses Scripts\\spd-lsp.exe and ; in PATH", () => {
  const existing = ["C:\\py\\Scripts\\spd-lsp.exe", "C:\\ws\\.venv\\Scripts\\spd-lsp.exe"];
  const onPath = input({ platform: "win32", workspaceFolders: [], pathEnv: "C:\\a;C:\\py\\Scripts" }, existing);
  assert.equal(resolveServerPath(onPath), existing[0]);
  assert.equal(resolveServerPath({ ...onPath, workspaceFolders: ["C:\\ws"] }), existing[1]);
});
