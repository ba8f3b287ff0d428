import { strict as assert } from "node:assert";
import { test } from "node:test";
import { notFoundMessage, resolveServerPath, ResolveInput } from "../serverPath";

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

function found(overrides: Partial<ResolveInput>, existing: string[] = []): string | undefined {
  return resolveServerPath(input(overrides, existing)).command;
}

test("a configured path wins and ${workspaceFolder} is expanded", () => {
  const existing = ["/ws/env/bin/spd-lsp", "/ws/tools/spd-lsp", "/ws/.venv/bin/spd-lsp"];
  assert.equal(found({ configured: "${workspaceFolder}/env/bin/spd-lsp" }, existing), "/ws/env/bin/spd-lsp");
  assert.equal(found({ configured: "tools/spd-lsp" }, existing), "/ws/tools/spd-lsp");
});

test("a configured path that does not exist is not found, and nothing else is tried", () => {
  const resolution = resolveServerPath(input({ configured: "/nowhere/spd-lsp" }, ["/ws/.venv/bin/spd-lsp"]));
  assert.deepEqual(resolution, { command: undefined, searched: ["/nowhere/spd-lsp"] });
});

test("a configured bare name is looked up on PATH", () => {
  assert.equal(found({ configured: "spd-lsp-dev" }, ["/usr/bin/spd-lsp-dev"]), "/usr/bin/spd-lsp-dev");
});

test("the workspace's virtual environment comes before PATH", () => {
  assert.equal(found({}, ["/usr/bin/spd-lsp", "/ws/.venv/bin/spd-lsp"]), "/ws/.venv/bin/spd-lsp");
});

test("every workspace folder's .venv and venv are searched, not only the first", () => {
  const folders = { workspaceFolders: ["/a", "/b"] };
  assert.equal(found(folders, ["/b/venv/bin/spd-lsp", "/usr/bin/spd-lsp"]), "/b/venv/bin/spd-lsp");
});

test("a virtual environment next to the open file, or above it inside the workspace, is found first", () => {
  const activeFile = "/ws/services/api/src/app.py";
  assert.equal(found({ activeFile }, ["/ws/services/api/.venv/bin/spd-lsp", "/ws/.venv/bin/spd-lsp"]), "/ws/services/api/.venv/bin/spd-lsp");
  assert.deepEqual(resolveServerPath(input({ activeFile })).searched, [
    "/ws/services/api/src/.venv/bin/spd-lsp",
    "/ws/services/api/src/venv/bin/spd-lsp",
    "/ws/services/api/.venv/bin/spd-lsp",
    "/ws/services/api/venv/bin/spd-lsp",
    "/ws/services/.venv/bin/spd-lsp",
    "/ws/services/venv/bin/spd-lsp",
    "/ws/.venv/bin/spd-lsp",
    "/ws/venv/bin/spd-lsp",
    "/usr/local/bin/spd-lsp",
    "/usr/bin/spd-lsp",
  ]);
});

test("above the workspace folder is never searched", () => {
  assert.equal(found({ activeFile: "/ws/pkg/mod.py" }, ["/.venv/bin/spd-lsp"]), undefined);
});

test("falls back to PATH, then to nothing, listing what was searched", () => {
  assert.equal(found({}, ["/usr/bin/spd-lsp"]), "/usr/bin/spd-lsp");
  assert.deepEqual(resolveServerPath(input({})), {
    command: undefined,
    searched: ["/ws/.venv/bin/spd-lsp", "/ws/venv/bin/spd-lsp", "/usr/local/bin/spd-lsp", "/usr/bin/spd-lsp"],
  });
});

test("the not-found message names every place searched and how to fix it", () => {
  const { searched } = resolveServerPath(input({}));
  const text = notFoundMessage(searched, { configured: "" });
  for (const place of searched) {
    assert.ok(text.includes(place), place);
  }
  assert.match(text, /spd\.serverPath/);
  assert.match(notFoundMessage(["/nowhere/spd-lsp"], { configured: "/nowhere/spd-lsp" }), /spd\.serverPath is "\/nowhere\/spd-lsp"/);
});

test("Windows uses Scripts\\spd-lsp.exe and ; in PATH", () => {
  const existing = ["C:\\py\\Scripts\\spd-lsp.exe", "C:\\ws\\.venv\\Scripts\\spd-lsp.exe"];
  const onPath = input({ platform: "win32", workspaceFolders: [], pathEnv: "C:\\a;C:\\py\\Scripts" }, existing);
  assert.equal(resolveServerPath(onPath).command, existing[0]);
  assert.equal(resolveServerPath({ ...onPath, workspaceFolders: ["C:\\ws"] }).command, existing[1]);
});
