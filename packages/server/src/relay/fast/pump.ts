// Moves a body of known length, or a run of a chunked body's chunks, from one
// socket to the other in the kernel (native/relay_pump.c), instead of through
// JavaScript 64 KiB at a time.
//
// While a pump runs it alone reads the source and writes the destination.
// Node must not read the source meanwhile, or bytes would go two ways: the
// source's handle stops reading, and its readStart is held off until the pump
// ends (Node's net.Socket starts reading through `_handle.readStart()` and
// tracks it in `_handle.reading`; those are the internals this relies on, and
// `pumpable` checks that they are there). The relay itself writes nothing to
// the destination while a pump runs.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';

interface PumpNative {
  start(
    fromFd: number,
    toFd: number,
    length: number,
    idleMs: number,
    done: (code: string | null, moved: number, side: 'from' | 'to' | null) => void,
    chunked: boolean,
  ): object;
  cancel(handle: object): number;
}

/** The part of a net.Socket's libuv stream handle the pump uses. */
interface StreamHandle {
  fd: number;
  reading: boolean;
  readStart(): number;
  readStop(): number;
}

function load(): PumpNative {
  const candidates = [join(import.meta.dirname, '../../../build/Release/relay_pump.node'), join(import.meta.dirname, 'relay_pump.node')];
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`the relay's native pump was not found (looked in ${candidates.join(', ')}); run the server build, or switch the fast path off (PADDOCK_PROXY_FAST_PATH=0)`);
  return createRequire(import.meta.url)(found) as PumpNative;
}

let loaded: PumpNative | undefined;
const native = (): PumpNative => (loaded ??= load());

/** Loads the addon now, or throws saying where it was looked for. */
export function loadPump(): void {
  native();
}

function handleOf(s: Duplex): StreamHandle | undefined {
  const h = (s as unknown as { _handle?: Partial<StreamHandle> | null })._handle;
  if (!h || typeof h.fd !== 'number' || h.fd < 0 || typeof h.readStart !== 'function' || typeof h.readStop !== 'function') return undefined;
  return h as StreamHandle;
}

/**
 * True when a pump can take over now: both are sockets with descriptors,
 * nothing read from `from` waits in Node, and nothing written to `to` is
 * still queued in Node, so the pump's bytes follow everything before them.
 */
export function pumpable(from: Duplex, to: Duplex): boolean {
  return (
    !from.destroyed &&
    !to.destroyed &&
    from.readableLength === 0 &&
    to.writableLength === 0 &&
    handleOf(from) !== undefined &&
    handleOf(to) !== undefined
  );
}

export interface PumpResult {
  moved: number;
  /**
   * Null once every byte moved (for a chunked body: once it stopped right
   * after a chunk's data, at framing it leaves to the relay); else 'EOF'
   * (the source ended first), 'ETIMEDOUT' or an errno name.
   */
  code: string | null;
  /** Which socket failed. */
  side: 'from' | 'to' | null;
}

export class Pump {
  private handle: object | undefined;
  private readonly source: StreamHandle;

  /**
   * Starts moving `length` bytes; `done` is called once, later, unless the
   * pump is cancelled first. `idleMs` (0 = none) ends it with ETIMEDOUT when
   * no byte moved for that long. With `chunked`, `length` is what is left of
   * the data of a chunk of a chunked body, and the pump goes on through the
   * chunks after it (native/relay_pump.c says how far). Call only when
   * {@link pumpable} is true.
   */
  constructor(
    private readonly from: Duplex,
    to: Duplex,
    length: number,
    idleMs: number,
    done: (result: PumpResult) => void,
    chunked = false,
  ) {
    const source = handleOf(from)!;
    const dest = handleOf(to)!;
    this.source = source;
    source.reading = false;
    source.readStop();
    // Node asking to read again (a resume, a read(0)) waits for the pump's end.
    source.readStart = () => 0;
    try {
      this.handle = native().start(source.fd, dest.fd, length, idleMs, (code, moved, side) => {
        this.handle = undefined;
        this.giveBack();
        done({ code, moved, side });
      }, chunked);
    } catch (err) {
      this.giveBack();
      throw err;
    }
  }

  /** Stops the pump; `done` is not called. Gives the bytes it moved (0 once it has ended). */
  cancel(): number {
    if (!this.handle) return 0;
    const moved = native().cancel(this.handle);
    this.handle = undefined;
    this.giveBack();
    return moved;
  }

  /** Node reads the source again, as it would have without the pump. */
  private giveBack(): void {
    delete (this.source as Partial<StreamHandle>).readStart;
    if (this.from.destroyed) return;
    if (this.from.isPaused()) {
      // Reading starts when the stream is resumed, as it does for any paused socket.
      this.source.reading = false;
      return;
    }
    this.source.reading = true;
    this.source.readStart();
  }
}

/**
 * Starts a {@link Pump}, or gives undefined when the system will not let it
 * start (out of descriptors, say): the relay then moves the body itself.
 */
export function startPump(
  from: Duplex,
  to: Duplex,
  length: number,
  idleMs: number,
  done: (result: PumpResult) => void,
  chunked = false,
): Pump | undefined {
  try {
    return new Pump(from, to, length, idleMs, done, chunked);
  } catch {
    return undefined;
  }
}
