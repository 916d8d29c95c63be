// One JSON line per event on stderr; the runtime keeps it as the sandbox's envd log.
type Fields = Record<string, unknown>;

function write(level: string, msg: string, fields?: Fields): void {
  process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }) + '\n');
}

export const log = {
  info: (msg: string, fields?: Fields) => write('info', msg, fields),
  warn: (msg: string, fields?: Fields) => write('warn', msg, fields),
  error: (msg: string, fields?: Fields) => write('error', msg, fields),
};
