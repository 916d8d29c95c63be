// Opening an envd server stream (Start, Connect, WatchDir) the way E2B's SDK
// does: the first message must arrive within the request timeout, the
// stream as a whole lives at most `timeoutMs` (sent as Connect-Timeout-Ms and
// enforced here too), and it can be closed from this side at any time.
import type { CallOptions } from '@connectrpc/connect';
import { fromRpcError, type ErrorSubject } from './error-mapping.js';
import { SandboxError, TimeoutError } from './errors.js';

export interface StreamSettings {
  /** Bound on the wait for the first message; 0 for none. */
  requestTimeoutMs: number;
  /** Lifetime of the whole stream; 0 for none. */
  timeoutMs: number;
  /** The caller's signal; it closes the stream whenever it fires. */
  signal?: AbortSignal | undefined;
  /** Call options to add, such as the user. */
  callOptions?: CallOptions | undefined;
  subject: ErrorSubject;
}

/** A stream whose first message has arrived. */
export interface OpenedStream<M> {
  first: M;
  /** The messages after the first. */
  rest: AsyncIterator<M>;
  /** Ends the stream from this side; reading `rest` then fails. */
  close(): void;
}

/**
 * Starts a server stream and waits for its first message. `open` makes the
 * call with the options it is given; `convert` turns each wire message into
 * what the caller works with.
 */
export async function openStream<W, M>(
  open: (options: CallOptions) => AsyncIterable<W>,
  convert: (message: W) => M,
  settings: StreamSettings,
): Promise<OpenedStream<M>> {
  const controller = new AbortController();
  const callerSignal = settings.signal;
  const onCallerAbort = (): void => controller.abort(callerSignal?.reason);
  callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
  if (callerSignal?.aborted) controller.abort(callerSignal.reason);

  const options: CallOptions = { ...settings.callOptions, signal: controller.signal };
  if (settings.timeoutMs > 0) options.timeoutMs = settings.timeoutMs;
  // Nothing is sent before the first read.
  const messages = open(options)[Symbol.asyncIterator]();
  // Once a read has seen the end or a failure, the call is over and has let go of its timer.
  let over = false;
  const close = (): void => {
    callerSignal?.removeEventListener('abort', onCallerAbort);
    if (over) return;
    over = true;
    controller.abort();
    // Connect clears its deadline timer only when a read sees the end or the
    // abort; a stream left unread would keep the timer, and the process, alive.
    void drain(messages);
  };

  let handshakeExpired = false;
  const handshake =
    settings.requestTimeoutMs > 0
      ? setTimeout(() => {
          handshakeExpired = true;
          controller.abort();
        }, settings.requestTimeoutMs)
      : undefined;
  try {
    const first = await messages.next();
    if (first.done) throw new SandboxError('the stream ended before its first message');
    return {
      first: convert(first.value),
      rest: {
        async next(): Promise<IteratorResult<M>> {
          let item: IteratorResult<W>;
          try {
            item = await messages.next();
          } catch (err) {
            over = true;
            throw callerSignal?.aborted ? abortedByCaller(err) : err;
          }
          if (item.done) over = true;
          return item.done ? { done: true, value: undefined } : { done: false, value: convert(item.value) };
        },
      },
      close,
    };
  } catch (err) {
    close();
    if (callerSignal?.aborted) throw abortedByCaller(err);
    if (handshakeExpired) {
      throw new TimeoutError(`no first message within ${settings.requestTimeoutMs} ms (requestTimeoutMs)`, { cause: err });
    }
    throw fromRpcError(err, settings.subject);
  } finally {
    clearTimeout(handshake);
  }
}

function abortedByCaller(err: unknown): SandboxError {
  return new SandboxError('the call was aborted by its signal', { cause: err });
}

async function drain(messages: AsyncIterator<unknown>): Promise<void> {
  try {
    while (!(await messages.next()).done);
  } catch {
    // The abort itself: what draining waits for.
  }
}
