// The streams envd is serving, so that all of them can be ended at once with
// a reason their clients are told (POST /streams/end: the control plane is
// stopping, and the connections through it are about to be cut).
import { Code, ConnectError } from '@connectrpc/connect';

export class StreamEnds {
  private ending = new AbortController();
  /** The streams under way that the next end() ends. */
  private open = new Set<object>();

  /**
   * A stream begins: its signal aborts, with the error the stream must end
   * with, when end() is called before `done()`.
   */
  begin(): { signal: AbortSignal; done(): void } {
    const stream = {};
    const open = this.open;
    open.add(stream);
    return { signal: this.ending.signal, done: () => void open.delete(stream) };
  }

  /** Ends every stream under way with `unavailable: reason`; streams begun later are not affected. Returns how many there were. */
  end(reason: string): number {
    const n = this.open.size;
    const ending = this.ending;
    this.ending = new AbortController();
    this.open = new Set();
    ending.abort(new ConnectError(reason, Code.Unavailable));
    return n;
  }
}
