// One JSON line per event on stderr; the runtime keeps it as the sandbox's envd log.
type Fields = Record<string, unknown>;

// When whoever reads stderr has gone (EPIPE), logging stops: an unhandled
// write error would reach the uncaught-exception handler, which logs it to
// the same broken pipe, and so on at full CPU.
let stderrGone = false;
process.stderr.on('error', () => {
  stderrGone = true;
});

function write(level: string, msg: string, fields?: Fields): void {
  if (stderrGone) return;
  process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }) + '\n');
}

export const log = {
  info: (msg: string, fields?: Fields) => write('info', msg, fields),
  warn: (msg: string, fields?: Fields) => write('warn', msg, fields),
  error: (msg: string, fields?: Fields) => write('error', msg, fields),
};
