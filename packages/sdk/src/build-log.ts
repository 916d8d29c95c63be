// What a template build reports: its status and its log entries, as the
// SDK hands them to `onBuildLogs` and returns them from `getBuildStatus`.

/** Severity of a build log entry. */
export type LogEntryLevel = 'debug' | 'info' | 'warn' | 'error';

export const LEVELS: readonly LogEntryLevel[] = ['debug', 'info', 'warn', 'error'];

/** One line of a build's log. */
export class LogEntry {
  constructor(
    /** When the entry was logged. */
    readonly timestamp: Date,
    /** Severity of the entry. */
    readonly level: LogEntryLevel,
    /** Text of the entry. */
    readonly message: string,
  ) {}

  /** The entry as one line: `[time] LEVEL: message`. */
  toString(): string {
    return `[${this.timestamp.toISOString()}] ${this.level.toUpperCase()}: ${this.message}`;
  }
}

/** The first entry the SDK reports for a build it follows. */
export class LogEntryStart extends LogEntry {
  constructor(timestamp: Date, message: string) {
    super(timestamp, 'info', message);
  }
}

/** The last entry the SDK reports for a build it follows. */
export class LogEntryEnd extends LogEntry {
  constructor(timestamp: Date, message: string) {
    super(timestamp, 'info', message);
  }
}

/** An `onBuildLogs` that prints entries of `minLevel` (default `info`) and above to the console. */
export function defaultBuildLogger(options: { minLevel?: LogEntryLevel } = {}): (entry: LogEntry) => void {
  const min = LEVELS.indexOf(options.minLevel ?? 'info');
  return (entry) => {
    if (LEVELS.indexOf(entry.level) < min) return;
    (entry.level === 'error' ? console.error : console.log)(entry.toString());
  };
}

/** Where a build is: `waiting` to be started, `building`, `ready`, or failed (`error`). */
export type TemplateBuildStatus = 'building' | 'waiting' | 'ready' | 'error';

/** Why a build failed. */
export interface BuildStatusReason {
  /** What went wrong. */
  message: string;
  /** Step that failed: its number, `base` or `finalize`. */
  step?: string;
  /** The last log entries of the failing step. */
  logEntries: LogEntry[];
}

/** A build's status, as `Template.getBuildStatus` returns it. */
export interface TemplateBuildStatusResponse {
  /** ID of the build. */
  buildID: string;
  /** ID of the template. */
  templateID: string;
  /** Where the build is. */
  status: TemplateBuildStatus;
  /** Log entries from the `logsOffset` asked for on. */
  logEntries: LogEntry[];
  /** The same entries as plain lines. */
  logs: string[];
  /** Why the build failed; only with status `error`. */
  reason?: BuildStatusReason;
}

