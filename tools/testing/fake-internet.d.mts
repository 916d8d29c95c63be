import type { ChildProcess } from 'node:child_process';

/** The TCP port each fake internet host holds connections open on. */
export declare const HOLD_PORT: number;

/** Runs a command (15 s at most): its stdout, or an error with its stderr. */
export declare function sh(cmd: string, args: string[], input?: string): Promise<string>;

/** A process whose JSON lines can be waited for, each wait bounded. */
export declare class Watched {
  readonly lines: Array<Record<string, unknown>>;
  readonly child: ChildProcess;
  /** Its output ended: every line it wrote is in `lines`. */
  readonly ended: boolean;
  constructor(child: ChildProcess);
  /** The first line from index `since` on that `pred` takes. */
  waitFor(pred: (l: Record<string, unknown>) => boolean, what: string, ms?: number, since?: number): Promise<Record<string, unknown>>;
}

export interface FakeInternetOptions {
  /** Names this test's interfaces and namespace start with: at most 9 characters. */
  prefix: string;
  /** The /30 between the host (its first address) and the fake internet (its second), e.g. 198.51.100.4. */
  transit: string;
  /** Addresses the servers listen on; each routed from the host. */
  hosts: string[];
  /** The DNS server's address (routed too). */
  dns: string;
  /** A names of the DNS server: lower case, no trailing dot. */
  names: Record<string, string>;
}

export interface FakeInternet {
  /** The host's end of the veth: the sandboxes' uplink. */
  uplink: string;
  netnsPath: string;
  dns: string;
  /** What the servers report: `held`, `closed`, `dns`. */
  events: Watched;
  stop(): Promise<void>;
}

export declare function startFakeInternet(o: FakeInternetOptions): Promise<FakeInternet>;
