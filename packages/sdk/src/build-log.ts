// What a template build reports: its status and its log entries, as the
// SDK hands them to `onBuildLogs` and returns them from `getBuildStatus`.

/** Severity of a build log entry. */
export type LogEntryLevel = 'debug' | 'info' | 'warn' | 'error';

export const LEVELS: readonly LogEntryLevel[] = ['debug', 'info', 'warn', 'error'];

/** One line of a build's log. */
export class LogEntry {
  constructor(
    readonly timestamp: Date,
    readonly level: LogEntryLevel,
    readonly message: string,
  ) {}

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

export type TemplateBuildStatus = 'building' | 'waiting' | 'ready' | 'error';

export interface BuildStatusReason {
  message: string;
  /** Step that failed: its number, `base` or `finalize`. */
  step?: string;
  logEntries: LogEntry[];
}

export interface TemplateBuildStatusResponse {
  buildID: string;
  templateID: string;
  status: TemplateBuildStatus;
  /** Log entries from the `logsOffset` asked for on. */
  logEntries: LogEntry[];
  /** The same entries as plain lines. */
  logs: string[];
  reason?: BuildStatusReason;
}

