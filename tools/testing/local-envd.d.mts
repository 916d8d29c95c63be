import type { ChildProcess } from 'node:child_process';

export declare const envdMain: string;

export interface LocalEnvdOptions {
  /** Name prefix of the temporary directory. */
  prefix?: string;
  /** envd's access token; none when left out. */
  token?: string;
  port?: number;
  extraArgs?: string[];
  /** The entry point to run: envdMain unless given (a copy of the build, say). */
  main?: string;
}

export interface RunningEnvd {
  url: string;
  port: number;
  pid: number;
  /** Temporary directory: homes under home/, scratch space under work/ (mode 0777). */
  dir: string;
  home: { root: string; user: string };
  token: string | undefined;
  /** envd's stderr, a line each. */
  logs: string[];
  child: ChildProcess;
  /** SIGTERM (SIGKILL after 10 s), then removes the directory. */
  stop(): Promise<void>;
}

export declare function startLocalEnvd(options?: LocalEnvdOptions): Promise<RunningEnvd>;
