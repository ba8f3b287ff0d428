/**
 * One language client at a time, replaceable from any state.
 *
 * vscode-languageclient's `stop()` throws unless the client is running
 * (`startFailed`, `starting`, `initial`), and a stopped or disposed client is
 * best replaced rather than restarted (its server options are fixed at
 * construction, and a changed `spd.serverPath` needs new ones). So a restart
 * retires whatever client exists — a start in flight is given a moment to
 * settle, then its server process is ended; a running client is disposed
 * (shutdown + exit); a server process left behind by a failed start is killed —
 * and only then creates and starts a new client. Restarts are queued, never
 * interleaved, and a queued step never waits on a start that may hang.
 *
 * Free of `vscode` imports: the client is anything with this shape (the real
 * LanguageClient in the extension and in the tests).
 */

export interface ServerProcess {
  readonly exitCode: number | null;
  readonly signalCode: NodeJS.Signals | null;
  kill(signal?: NodeJS.Signals): boolean;
}

export interface ManagedClient {
  start(): Promise<void>;
  dispose(timeout?: number): Promise<void>;
  /** True while starting or running. */
  needsStop(): boolean;
  isRunning(): boolean;
  readonly serverProcess?: ServerProcess;
}

export interface LifecycleOptions<C extends ManagedClient> {
  /** A new client, or undefined when there is nothing to start (it says why itself). */
  create: () => C | undefined;
  /** A start of the current client failed (not called for clients already replaced). */
  startFailed: (error: unknown) => void;
  log: (message: string) => void;
  /** How long a start in flight, or a shutdown, may take before its process is ended. */
  graceMs?: number;
}

interface Entry<C> {
  client: C;
  started: Promise<void>;
}

/** True when `promise` settled within `ms`, false when the time ran out first. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const settled = promise.then(
    () => true,
    () => true,
  );
  try {
    return await Promise.race([settled, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function isAlive(process: ServerProcess | undefined): process is ServerProcess {
  return process !== undefined && process.exitCode === null && process.signalCode === null;
}

export class ServerLifecycle<C extends ManagedClient> {
  private current: Entry<C> | undefined;
  private queue: Promise<void> = Promise.resolve();
  private readonly graceMs: number;

  constructor(private readonly options: LifecycleOptions<C>) {
    this.graceMs = options.graceMs ?? 2000;
  }

  get client(): C | undefined {
    return this.current?.client;
  }

  /** False for a client that was replaced or stopped: its events are no longer the extension's business. */
  isCurrent(client: C): boolean {
    return this.current?.client === client;
  }

  /** Retires the current client, whatever its state, and starts a new one. */
  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.retireCurrent();
      this.launch();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.retireCurrent());
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    const result = this.queue.then(step);
    this.queue = result.catch((error) => this.options.log(`SPD: lifecycle step failed: ${error}`));
    return result;
  }

  private launch(): void {
    const client = this.options.create();
    if (client === undefined) {
      return;
    }
    const started = client.start();
    this.current = { client, started };
    started.catch((error) => {
      if (this.isCurrent(client)) {
        this.options.startFailed(error);
      }
    });
  }

  private async retireCurrent(): Promise<void> {
    const entry = this.current;
    this.current = undefined;
    if (entry !== undefined) {
      await this.retire(entry);
    }
  }

  private async retire({ client, started }: Entry<C>): Promise<void> {
    if (client.needsStop() && !client.isRunning()) {
      // Starting: stop() refuses it. Let the start settle; a server that never
      // answers `initialize` is ended, which fails the start.
      if (!(await settlesWithin(started, this.graceMs))) {
        this.options.log("SPD: the server did not finish starting; ending it");
        client.serverProcess?.kill();
        await settlesWithin(started, this.graceMs);
      }
    }
    if (client.isRunning()) {
      await client.dispose(this.graceMs).catch((error) => this.options.log(`SPD: stopping the server failed: ${error}`));
    }
    const leftover = client.serverProcess;
    if (isAlive(leftover)) {
      this.options.log("SPD: ending a server process left by a failed start");
      leftover.kill();
    }
  }
}
