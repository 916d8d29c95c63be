// envd's copy tool (a build's COPY step, placed on the host) in worker
// threads of the runtime's own node rather than a node process per copy:
// starting node and loading the tools' bundle was most of a small copy's
// time. The copy itself is synchronous file work; in a worker it does not
// stop the server's event loop. One worker is kept loaded between copies;
// copies at the same time get workers of their own, ended after. The same
// workers say how a build step's command runs in an image (step-process).
import { Worker } from 'node:worker_threads';

export interface CopyWorkerOptions {
  /** The copy ends in error after this long, ms. */
  timeoutMs: number;
  signal?: AbortSignal;
}

/** A copy that failed: `message` is the tool's line without its `copy: `. */
export class CopyFailed extends Error {
  override name = 'CopyFailed';
}

/** The most heap a copy's worker may use; past it the worker ends, not the server. */
const WORKER_HEAP_MB = 1024;

export class CopyWorkers {
  private idle: Worker | undefined;
  private readonly busy = new Set<Worker>();
  private closed = false;

  /** `script`: envd's tools bundle (`envdToolsScript`). */
  constructor(private readonly script: string) {}

  private start(): Worker {
    const worker = new Worker(this.script, {
      workerData: { serve: true },
      // As the tool process ran: nothing of the server's environment.
      env: {},
      stdout: true,
      stderr: true,
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
    });
    worker.stdout.resume();
    worker.stderr.resume();
    // A worker waiting for copies does not keep the process alive.
    worker.unref();
    // An idle worker that ends by itself is dropped; the next copy starts another.
    worker.once('exit', () => {
      if (this.idle === worker) this.idle = undefined;
    });
    worker.on('error', () => undefined);
    return worker;
  }

  /** Loads a worker ahead of the first copy. */
  warm(): void {
    if (!this.closed && !this.idle) this.idle = this.start();
  }

  /** Runs the copy tool with `args`; rejects with CopyFailed naming what failed, or with the signal's reason. */
  async copy(args: readonly string[], opts: CopyWorkerOptions): Promise<void> {
    await this.request('copy', args, opts);
  }

  /** Runs the step-process tool with `args`: what it answers, or CopyFailed naming what failed. */
  async stepProcess(args: readonly string[], opts: CopyWorkerOptions): Promise<unknown> {
    return this.request('step-process', args, opts);
  }

  private async request(tool: 'copy' | 'step-process', args: readonly string[], opts: CopyWorkerOptions): Promise<unknown> {
    if (this.closed) throw new Error('the copy workers are closed');
    opts.signal?.throwIfAborted();
    const worker = this.idle ?? this.start();
    this.idle = undefined;
    this.busy.add(worker);
    let reusable = false;
    let value: unknown;
    try {
      await new Promise<void>((resolve, reject) => {
        const done = (err?: Error) => {
          clearTimeout(timer);
          opts.signal?.removeEventListener('abort', onAbort);
          worker.off('message', onMessage);
          worker.off('error', onError);
          worker.off('exit', onExit);
          if (err) reject(err);
          else resolve();
        };
        const onMessage = (msg: { error?: string; value?: unknown }) => {
          reusable = true;
          value = msg.value;
          done(msg.error === undefined ? undefined : new CopyFailed(msg.error.replace(`${tool}: `, '')));
        };
        const onError = (err: Error) => done(new Error(`the copy's worker failed: ${err.message}`));
        const onExit = (code: number) => done(new Error(`the copy's worker ended (exit code ${code})`));
        const onAbort = () => done(opts.signal!.reason instanceof Error ? opts.signal!.reason : new Error('the copy was cancelled'));
        const timer = setTimeout(() => done(new Error(`the copy took longer than ${Math.round(opts.timeoutMs / 1000)} s`)), opts.timeoutMs);
        worker.on('message', onMessage);
        worker.on('error', onError);
        worker.on('exit', onExit);
        opts.signal?.addEventListener('abort', onAbort, { once: true });
        worker.postMessage({ tool, args: [...args] });
      });
      return value;
    } finally {
      this.busy.delete(worker);
      // A worker that answered is kept (one at most); one that failed, timed out or was cancelled mid-copy is ended.
      if (reusable && !this.closed && !this.idle) this.idle = worker;
      else void worker.terminate();
    }
  }

  /** Ends every worker; copies under way fail. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.busy, ...(this.idle ? [this.idle] : [])];
    this.idle = undefined;
    await Promise.all(all.map((w) => w.terminate()));
  }
}
