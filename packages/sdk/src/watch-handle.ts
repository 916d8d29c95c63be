// A directory being watched: events are handed over as they arrive until
// stop(), the watch's timeout, or a failure ends it.
import type { WatchMessage } from './convert.js';
import { fromRpcError } from './error-mapping.js';
import type { OpenedStream } from './stream.js';
import type { FilesystemEvent } from './types.js';

/** Gets each event in order; a promise it returns is awaited before the next event. */
export type WatchEventCallback = (event: FilesystemEvent) => unknown;
/** Called once when the watch ends: with no argument after `stop()`, with the error that ended it otherwise. */
export type WatchExitCallback = (err?: Error) => unknown;

/** Handle of `files.watchDir`; `stop()` ends the watch. */
export class WatchHandle {
  readonly #stream: OpenedStream<WatchMessage>;
  readonly #onEvent: WatchEventCallback;
  readonly #onExit: WatchExitCallback | undefined;
  readonly #done: Promise<void>;
  #stopped = false;

  constructor(stream: OpenedStream<WatchMessage>, onEvent: WatchEventCallback, onExit: WatchExitCallback | undefined) {
    this.#stream = stream;
    this.#onEvent = onEvent;
    this.#onExit = onExit;
    this.#done = this.#consume();
    // An error of onExit is handed to stop(); left alone it must not crash the process.
    this.#done.catch(() => undefined);
  }

  /**
   * Ends the watch. Resolves once the last callback has returned; none runs
   * after. Rejects with what `onExit` threw, if it threw.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#stream.close();
    await this.#done;
  }

  async #consume(): Promise<void> {
    let failure: Error | undefined;
    try {
      for (;;) {
        const item = await this.#stream.rest.next();
        if (item.done || this.#stopped) break;
        if (item.value.kind !== 'event') continue;
        try {
          await this.#onEvent(item.value.event);
        } catch (err) {
          // A failing callback ends the watch, and is reported like a failing stream.
          failure = err instanceof Error ? err : new Error(String(err));
          break;
        }
      }
    } catch (err) {
      // After stop(), the stream fails because it was closed here: not worth reporting.
      if (!this.#stopped) failure = fromRpcError(err, 'file');
    } finally {
      this.#stream.close();
    }
    await this.#onExit?.(failure);
  }
}
