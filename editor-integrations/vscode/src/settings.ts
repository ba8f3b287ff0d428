/**
 * VS Code's `spd.*` configuration -> the server's settings contract.
 *
 * Kept free of `vscode` imports so Node tests can run it. Unset values (null,
 * "") are left out so the server's own defaults apply; `serverPath` is the
 * client's business and is never sent.
 */

export type ConfigGetter = (key: string) => unknown;

export interface NgramSettings {
  enabled?: boolean;
  orders?: number[];
  weights?: Record<string, number>;
  alpha?: number;
  db?: string;
  index?: boolean;
  exclude?: string[];
}

export interface ContextSettings {
  snippets?: boolean;
  header?: boolean;
  tokens?: number;
  suffixTokens?: number;
  sources?: string[];
}

export interface ServerSettings {
  k?: number;
  maxTokens?: number;
  decoding?: string;
  temperature?: number;
  model?: string;
  device?: string;
  dtype?: string;
  quantize?: string;
  fastPath?: boolean;
  outputWeights?: string;
  maxPrefixTokens?: number;
  multiline?: boolean | "auto";
  multilineMaxTokens?: number;
  verify?: string;
  engine?: string;
  engineTokenFile?: string;
  engineCertificate?: string;
  engineStandby?: boolean;
  promptFormat?: string;
  exclude?: string[];
  ngrams?: NgramSettings;
  context?: ContextSettings;
}

const TOP_LEVEL = [
  "k", "maxTokens", "decoding", "temperature", "model", "device", "dtype", "quantize", "fastPath", "outputWeights", "maxPrefixTokens",
  "multiline", "multilineMaxTokens", "verify", "engine", "engineTokenFile", "engineCertificate", "engineStandby", "promptFormat",
  "exclude",
] as const;
const NGRAM_KEYS = ["enabled", "orders", "weights", "alpha", "db", "index", "exclude", "secretFilter"] as const;
const CONTEXT_KEYS = ["snippets", "header", "tokens", "suffixTokens", "sources"] as const;

function isSet(value: unknown): boolean {
  return value !== undefined && value !== null && value !== "";
}

function pick(get: ConfigGetter, keys: readonly string[], prefix: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const value = get(prefix + key);
    if (isSet(value)) {
      out[key] = value;
    }
  }
  return out;
}

/** Reads each key of the contract through `get` (e.g. `workspace.getConfiguration("spd").get`). */
export function toServerSettings(get: ConfigGetter): ServerSettings {
  const settings = pick(get, TOP_LEVEL, "") as ServerSettings;
  const ngrams = pick(get, NGRAM_KEYS, "ngrams.") as NgramSettings;
  if (Object.keys(ngrams).length > 0) {
    settings.ngrams = ngrams;
  }
  const context = pick(get, CONTEXT_KEYS, "context.") as ContextSettings;
  if (Object.keys(context).length > 0) {
    settings.context = context;
  }
  return settings;
}

/** The body of `workspace/didChangeConfiguration`, in the shape the server expects. */
export function configurationChange(settings: ServerSettings): { settings: { spd: ServerSettings } } {
  return { settings: { spd: settings } };
}
