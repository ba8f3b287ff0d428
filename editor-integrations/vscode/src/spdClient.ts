/**
 * The language client, with a `start()` and a `stop()` that behave in every state.
 *
 * vscode-languageclient 10.1.2 (lib/common/client.js), read for this:
 * - `stop()` throws when the client is starting or its start failed ("Client is
 *   not running and can't be stopped"), and the library itself calls
 *   `void this.stop()` when `initialize` fails, leaving an unhandled rejection.
 *   A client that is not running has no server to shut down: here that is a
 *   no-op; a running or stopping client stops as before.
 * - When the connection closes during `initialize` (the server died or was ended),
 *   `handleConnectionClosed` clears `_onStart` before `start()` returns it, so
 *   `start()` resolves although nothing runs, and the promise it dropped rejects
 *   with nobody listening. Here that promise is marked observed and `start()`
 *   rejects unless the client really runs.
 * Ending a start in flight is `ServerLifecycle`'s job.
 */

import { LanguageClient } from "vscode-languageclient/node";

export class SpdLanguageClient extends LanguageClient {
  override async start(): Promise<void> {
    const started = super.start();
    (this as unknown as { _onStart?: Promise<void> })._onStart?.catch(() => undefined);
    await started;
    if (!this.isRunning()) {
      throw new Error("the server closed the connection before it finished starting");
    }
  }

  override stop(timeout?: number): Promise<void> {
    const startingOrFailed = !this.isRunning() && !this.needsStart();
    return startingOrFailed ? Promise.resolve() : super.stop(timeout);
  }
}
