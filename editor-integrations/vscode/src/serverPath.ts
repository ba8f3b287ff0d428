/**
 * Where to find `spd-lsp`: the configured path, else a virtual environment
 * (`.venv` or `venv`, the usual `pip install -e .` setup) in the open file's
 * folder or any folder above it up to its workspace folder, then in each
 * workspace folder, else PATH. Every place looked at is reported, so a miss can
 * say exactly what was searched.
 */

import * as path from "node:path";

export interface ResolveInput {
  configured: string;
  workspaceFolders: string[];
  /** The file open in the editor, if any: its folders are searched first. */
  activeFile?: string;
  pathEnv: string;
  platform: NodeJS.Platform;
  exists: (file: string) => boolean;
}

export interface Resolution {
  /** An absolute path (or a bare name found on PATH), undefined when nothing was found. */
  command: string | undefined;
  /** Every executable path tried, in order. */
  searched: string[];
}

const VENV_DIRS = [".venv", "venv"];

function executableName(platform: NodeJS.Platform): string {
  return platform === "win32" ? "spd-lsp.exe" : "spd-lsp";
}

function pathsFor(platform: NodeJS.Platform): path.PlatformPath {
  return platform === "win32" ? path.win32 : path.posix;
}

function isInside(paths: path.PlatformPath, folder: string, file: string): boolean {
  const relative = paths.relative(folder, file);
  return relative === "" || (!relative.startsWith("..") && !paths.isAbsolute(relative));
}

/** The open file's folder and each one above it up to (and with) its workspace folder. */
function foldersUpward(paths: path.PlatformPath, activeFile: string | undefined, workspaceFolders: string[]): string[] {
  if (activeFile === undefined) {
    return [];
  }
  const start = paths.dirname(activeFile);
  const root = workspaceFolders.find((folder) => isInside(paths, folder, start));
  if (root === undefined) {
    return [start];
  }
  const folders = [start];
  for (let folder = start; folder !== root && paths.dirname(folder) !== folder; ) {
    folder = paths.dirname(folder);
    folders.push(folder);
  }
  return folders;
}

function venvCandidates(folder: string, platform: NodeJS.Platform): string[] {
  const binDir = platform === "win32" ? "Scripts" : "bin";
  return VENV_DIRS.map((venv) => pathsFor(platform).join(folder, venv, binDir, executableName(platform)));
}

function pathCandidates(name: string, pathEnv: string, platform: NodeJS.Platform): string[] {
  const separator = platform === "win32" ? ";" : ":";
  return pathEnv.split(separator).filter(Boolean).map((dir) => pathsFor(platform).join(dir, name));
}

function configuredCandidates(input: ResolveInput): string[] {
  const { configured, workspaceFolders, pathEnv, platform } = input;
  const paths = pathsFor(platform);
  const expanded = configured.replace(/\$\{workspaceFolder\}/g, workspaceFolders[0] ?? "");
  if (paths.isAbsolute(expanded)) {
    return [expanded];
  }
  if (!expanded.includes("/") && !expanded.includes(paths.sep)) {
    return pathCandidates(expanded, pathEnv, platform); // a bare command name, as a shell would run it
  }
  return workspaceFolders.length === 0 ? [paths.resolve(expanded)] : [paths.join(workspaceFolders[0], expanded)];
}

function searchOrder(input: ResolveInput): string[] {
  if (input.configured) {
    return configuredCandidates(input);
  }
  const { workspaceFolders, activeFile, pathEnv, platform } = input;
  const folders = [...foldersUpward(pathsFor(platform), activeFile, workspaceFolders), ...workspaceFolders];
  return [
    ...new Set([
      ...folders.flatMap((folder) => venvCandidates(folder, platform)),
      ...pathCandidates(executableName(platform), pathEnv, platform),
    ]),
  ];
}

export function resolveServerPath(input: ResolveInput): Resolution {
  const searched = searchOrder(input);
  return { command: searched.find(input.exists), searched };
}

/** The one message shown when `spd-lsp` is missing: what was searched and how to fix it. */
export function notFoundMessage(searched: string[], { configured }: { configured: string }): string {
  const where = searched.length > 0 ? searched.join(", ") : "nowhere (no workspace folder and an empty PATH)";
  const cause = configured ? `spd.serverPath is "${configured}", and no such executable exists` : "spd-lsp is not installed where the extension looks";
  return `SPD: language server not found: ${cause}. Searched: ${where}. Install it (pip install -e . in a .venv of the workspace) or set spd.serverPath.`;
}
