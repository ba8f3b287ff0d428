/**
 * Where to find `spd-lsp`: the configured path, else the workspace's virtual
 * environment (the usual `pip install -e .` setup), else PATH.
 */

import * as path from "node:path";

export interface ResolveInput {
  configured: string;
  workspaceFolders: string[];
  pathEnv: string;
  platform: NodeJS.Platform;
  exists: (file: string) => boolean;
}

const VENV_DIRS = [".venv", "venv"];

function executableName(platform: NodeJS.Platform): string {
  return platform === "win32" ? "spd-lsp.exe" : "spd-lsp";
}

function pathsFor(platform: NodeJS.Platform): path.PlatformPath {
  return platform === "win32" ? path.win32 : path.posix;
}

function venvCandidates(folder: string, platform: NodeJS.Platform): string[] {
  const binDir = platform === "win32" ? "Scripts" : "bin";
  return VENV_DIRS.map((venv) => pathsFor(platform).join(folder, venv, binDir, executableName(platform)));
}

/** Returns an absolute path, or undefined when `spd-lsp` cannot be found. */
export function resolveServerPath(input: ResolveInput): string | undefined {
  const { configured, workspaceFolders, pathEnv, platform, exists } = input;
  const paths = pathsFor(platform);
  if (configured) {
    const expanded = configured.replace(/\$\{workspaceFolder\}/g, workspaceFolders[0] ?? "");
    return paths.isAbsolute(expanded) || workspaceFolders.length === 0
      ? expanded
      : paths.join(workspaceFolders[0], expanded);
  }
  const separator = platform === "win32" ? ";" : ":";
  const candidates = [
    ...workspaceFolders.flatMap((folder) => venvCandidates(folder, platform)),
    ...pathEnv.split(separator).filter(Boolean).map((dir) => paths.join(dir, executableName(platform))),
  ];
  return candidates.find(exists);
}
