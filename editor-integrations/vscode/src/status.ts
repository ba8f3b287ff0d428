/**
 * What the status-bar item says, as a pure function of the client's state, and
 * how `spd.status` results read in the output channel.
 */

import { Control, initialControl, snoozeLeft } from "./control";

/** The client's own lifecycle: starting the server, running ("ready", "indexing"), failed, stopped. */
export type Phase = "starting" | "ready" | "indexing" | "error" | "stopped";

/** What the server pushes (`spd/didChangeStatus`): loading the model, warming up, ready, error. */
export interface ServerStatus {
  state: string;
  message?: string;
  model?: ModelInfo | null;
}

export interface StatusState {
  phase: Phase;
  progress?: { title: string; message?: string; percentage?: number };
  lastLatencyMs?: number;
  error?: string;
  /** The loaded model, from `spd.status` or the pushed status. */
  model?: ModelInfo;
  server?: ServerStatus;
  /** Answers the server gave; a server that pushes no status is settled after its first. */
  answered?: number;
  control: Control;
  /** The active editor's language, and whether `spd.enable` turns it off. */
  language?: { id: string; off: boolean };
}

export interface ModelInfo {
  name: string;
  device: string;
  /** Which engine serves: "in-process", "shared" (one model for every window: `spd.engine` "auto"), "remote". */
  engine?: string;
}

export interface StatusView {
  text: string;
  tooltip: string;
}

/** The `$/progress` work-done payloads (begin/report/end), as the LSP defines them. */
export type WorkDoneValue =
  | { kind: "begin"; title: string; message?: string; percentage?: number }
  | { kind: "report"; message?: string; percentage?: number }
  | { kind: "end"; message?: string };

export const initialState: StatusState = { phase: "starting", control: initialControl };

/** The pushed status; its model names the item at once. */
export function withServer(state: StatusState, params: unknown): StatusState {
  const pushed = params as { state?: unknown; message?: unknown; model?: { name?: unknown; device?: unknown; engineKind?: unknown } | null } | null;
  if (typeof pushed?.state !== "string") {
    return state;
  }
  const model = modelOf({ model: pushed.model });
  const server: ServerStatus = { state: pushed.state, message: typeof pushed.message === "string" ? pushed.message : undefined };
  const lastLatencyMs = pushed.state === "ready" ? state.lastLatencyMs : undefined; // no figure from a warm-up
  return { ...state, server, model: model ?? state.model, lastLatencyMs };
}

/** Whether a request starting now measures typing latency: the server has settled (its first model call is done). */
export function settled(state: StatusState): boolean {
  return state.server === undefined ? (state.answered ?? 0) > 0 : state.server.state === "ready";
}

export function withControl(state: StatusState, control: Control): StatusState {
  return { ...state, control };
}

export function withLanguage(state: StatusState, language: { id: string; off: boolean } | undefined): StatusState {
  return { ...state, language };
}

export function applyProgress(state: StatusState, value: WorkDoneValue): StatusState {
  switch (value.kind) {
    case "begin":
      return { ...state, phase: "indexing", progress: { title: value.title, message: value.message, percentage: value.percentage } };
    case "report": {
      const previous = state.progress ?? { title: "Working" };
      return {
        ...state,
        phase: "indexing",
        progress: {
          title: previous.title,
          message: value.message ?? previous.message,
          percentage: value.percentage ?? previous.percentage,
        },
      };
    }
    case "end":
      return { ...state, phase: "ready", progress: undefined };
  }
}

/** An answer that took `ms`; `measured`: the request started once the server had settled. */
export function recordLatency(state: StatusState, ms: number, measured = true): StatusState {
  return { ...state, lastLatencyMs: measured ? ms : state.lastLatencyMs, answered: (state.answered ?? 0) + 1 };
}

/** The model and device of a `spd.status` result, once the server has loaded one. */
export function modelOf(status: unknown): ModelInfo | undefined {
  const model = (status as { model?: { name?: unknown; device?: unknown; engineKind?: unknown } | null } | null)?.model;
  if (typeof model?.name !== "string" || typeof model.device !== "string") {
    return undefined;
  }
  return typeof model.engineKind === "string"
    ? { name: model.name, device: model.device, engine: model.engineKind }
    : { name: model.name, device: model.device };
}

export function withModel(state: StatusState, model: ModelInfo | undefined): StatusState {
  return { ...state, model };
}

export function withPhase(state: StatusState, phase: Phase, error?: string): StatusState {
  return { ...state, phase, error, progress: phase === "indexing" ? state.progress : undefined };
}

const MENU = "click for the SPD menu";

export function statusView(state: StatusState, now = Date.now()): StatusView {
  const chosen = controlView(state, now) ?? (state.phase === "ready" ? serverView(state) : undefined);
  return chosen ?? phaseView(state);
}

/** Off, snoozed or off for this language: the user's choice shows first while the client runs. */
function controlView(state: StatusState, now: number): StatusView | undefined {
  if (state.phase !== "ready" && state.phase !== "indexing") {
    return undefined;
  }
  if (state.control.off) {
    return { text: "$(eye-closed) SPD off", tooltip: `SPD: completions are off (SPD: Toggle turns them on); ${MENU}` };
  }
  const left = snoozeLeft(state.control, now);
  if (left !== undefined) {
    return { text: `$(watch) SPD snoozed ${left}m`, tooltip: `SPD: completions are snoozed for ${left} more min; ${MENU}` };
  }
  if (state.language?.off) {
    return { text: `$(eye-closed) SPD off for ${state.language.id}`, tooltip: `SPD: spd.enable turns ${state.language.id} off; ${MENU}` };
  }
  return undefined;
}

/** Loading the model, warming up, or an error, as the server pushes them (ready: the phase's view). */
function serverView(state: StatusState): StatusView | undefined {
  const server = state.server;
  const detail = server?.message ? ` (${server.message})` : "";
  switch (server?.state) {
    case "loading":
      return { text: "$(loading~spin) SPD loading", tooltip: `SPD: loading the model${detail}; ${MENU}` };
    case "warming":
      return { text: "$(flame) SPD warming up", tooltip: `SPD: warming up${detail}; ${MENU}` };
    case "error":
      return { text: "$(error) SPD", tooltip: `SPD: ${server.message ?? "the server reports an error"}; ${MENU}` };
    default:
      return undefined;
  }
}

function phaseView(state: StatusState): StatusView {
  switch (state.phase) {
    case "starting":
      return { text: "$(loading~spin) SPD", tooltip: "SPD: starting the language server" };
    case "error":
      return { text: "$(error) SPD", tooltip: `SPD: ${state.error ?? "the language server failed"}` };
    case "stopped":
      return { text: "$(circle-slash) SPD", tooltip: "SPD: the language server is stopped" };
    case "indexing": {
      const progress = state.progress;
      const percent = progress?.percentage === undefined ? "" : ` ${Math.round(progress.percentage)}%`;
      const detail = progress?.message ? ` (${progress.message})` : "";
      return { text: `$(sync~spin) SPD${percent}`, tooltip: `SPD: ${progress?.title ?? "indexing"}${detail}` };
    }
    case "ready": {
      const latency = state.lastLatencyMs === undefined ? "" : ` ${Math.round(state.lastLatencyMs)} ms`;
      const engine = state.model?.engine;
      const shared = engine !== undefined && engine !== "in-process" ? ` · ${engine}` : "";
      const model = state.model === undefined ? "" : ` ${state.model.name} · ${state.model.device}${shared}`;
      const took = state.lastLatencyMs === undefined ? "ready" : `last completion took ${Math.round(state.lastLatencyMs)} ms`;
      const served = engine === undefined ? "" : engine === "shared" ? ", served by the shared engine (one model for every window)"
        : engine === "remote" ? ", served by a remote engine" : ", in this server's process";
      const on = state.model === undefined ? "" : ` (${state.model.name} on ${state.model.device}${served})`;
      return { text: `$(sparkle) SPD${model}${latency}`, tooltip: `SPD: ${took}${on}; ${MENU}` };
    }
  }
}

/**
 * The lines the output channel shows for a `spd.status` result: the server's own `summary`
 * (model, engine, stores, last request, drafts accepted by rank) as it writes it; from a
 * server without one, every field flattened.
 */
export function formatStatus(result: unknown): string[] {
  const summary = result !== null && typeof result === "object" ? (result as { summary?: unknown }).summary : undefined;
  return typeof summary === "string" ? summary.split("\n").filter((line) => line !== "") : flattenStatus(result);
}

/** Flattens the server's status object into `a.b: value` lines, whatever its exact shape. */
export function flattenStatus(result: unknown, prefix = ""): string[] {
  if (result === null || typeof result !== "object" || Array.isArray(result)) {
    return [`${prefix || "status"}: ${JSON.stringify(result)}`];
  }
  return Object.entries(result as Record<string, unknown>).flatMap(([key, value]) => {
    const name = prefix ? `${prefix}.${key}` : key;
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? flattenStatus(value, name)
      : [`${name}: ${typeof value === "string" ? value : JSON.stringify(value)}`];
  });
}
