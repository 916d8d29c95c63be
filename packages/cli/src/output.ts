// What the CLI prints: colour only on a terminal (and never with NO_COLOR),
// aligned tables for people, JSON for scripts.

export const EXIT = {
  ok: 0,
  /** Something failed that is not the caller's fault. */
  failure: 1,
  /** The command line was wrong. */
  usage: 2,
  /** The machine lacks a prerequisite (see `paddock doctor`). */
  prerequisite: 3,
  /** The sandbox or template asked for does not exist. */
  notFound: 4,
  /** The server cannot be reached or refused the credentials. */
  unreachable: 5,
} as const;

/** An error to show without a stack trace, with the exit code it means. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failure,
    readonly hint?: string,
  ) {
    super(message);
  }
}

function colourOn(stream: NodeJS.WriteStream): boolean {
  if (process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== '') return false;
  if (process.env.FORCE_COLOR) return process.env.FORCE_COLOR !== '0';
  return Boolean(stream.isTTY);
}

const paint = (code: string) => (s: string, stream: NodeJS.WriteStream = process.stdout) => (colourOn(stream) ? `\x1b[${code}m${s}\x1b[0m` : s);

export const style = {
  bold: paint('1'),
  dim: paint('2'),
  red: paint('31'),
  green: paint('32'),
  yellow: paint('33'),
  cyan: paint('36'),
};

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

/** Columns padded to the widest cell; ANSI colour does not count as width. */
export function table(headers: string[], rows: string[][]): string {
  // eslint-disable-next-line no-control-regex -- ANSI colour sequences start with ESC
  const visible = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '').length;
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => visible(r[i] ?? ''))));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c + ' '.repeat(widths[i]! - visible(c))))
      .join('  ')
      .trimEnd();
  return [line(headers.map((h) => style.bold(h))), ...rows.map(line)].join('\n') + '\n';
}

export function printError(err: CliError): void {
  // An empty message only carries an exit code (a command's own, say).
  if (!err.message) return;
  process.stderr.write(`${style.red('error', process.stderr)}: ${err.message}\n`);
  if (err.hint) process.stderr.write(`${style.dim(err.hint, process.stderr)}\n`);
}
