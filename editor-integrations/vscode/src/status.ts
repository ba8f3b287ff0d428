/**
 * What the status-bar item says, as a pure function of the client's state, and
 * how `spd.status` results read in the output channel.
 */

export type Phase = "starting" | "ready" | "indexing" | "error" | "stopped";

export interface StatusState {
  phase: Phase;
  progress?: { title: string; message?: string; percentage?: number };
  lastLatencyMs?: number;
  error?: string;
  /** The loaded model, from `spd.status` (the server loads it on the first request). */
  model?: ModelInfo;
}

export interface ModelInfo {
  name: string;
  device: string;
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

export const initialState: StatusState = { phase: "starting" };

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

export function recordLatency(state: StatusState, ms: number): StatusState {
  return { ...state, lastLatencyMs: ms };
}

/** The model and device of a `spd.status` result, once the server has loaded one. */
export function modelOf(status: unknown): ModelInfo | undefined {
  const model = (status as { model?: { name?: unknown; device?: unknown } | null } | null)?.model;
  return typeof model?.name === "string" && typeof model.device === "string" ? { name: model.name, device: model.device } : undefined;
}

export function withModel(state: StatusState, model: ModelInfo | undefined): StatusState {
  return { ...state, model };
}

export function withPhase(state: StatusState, phase: Phase, error?: string): StatusState {
  return { ...state, phase, error, progress: phase === "indexing" ? state.progress : undefined };
}

export function statusView(state: StatusState): StatusView {
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
      const model = state.model === undefined ? "" : ` ${state.model.name} · ${state.model.device}`;
      const took = state.lastLatencyMs === undefined ? "ready" : `last completion took ${Math.round(state.lastLatencyMs)} ms`;
      const on = state.model === undefined ? "" : ` (${state.model.name} on ${state.model.device})`;
      return { text: `$(sparkle) SPD${model}${latency}`, tooltip: `SPD: ${took}${on}` };
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
