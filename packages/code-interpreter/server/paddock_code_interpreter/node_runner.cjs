// The JavaScript and TypeScript kernels' Node.js process (node_kernel.py
// starts it: `node node_runner.cjs LANGUAGE IN_FD OUT_FD`): cells come as JSON
// lines on IN_FD and run in one vm context that keeps their globals; what
// they print and how they end go back as JSON lines on OUT_FD. SIGINT (the kernel's interrupt) stops a running cell.
'use strict';
const fs = require('node:fs');
const readline = require('node:readline');
const util = require('node:util');
const vm = require('node:vm');
const { Console } = require('node:console');
const { createRequire } = require('node:module');

const language = process.argv[2] || 'javascript';
const inFd = Number(process.argv[3]);
const outFd = Number(process.argv[4]);
const send = (msg) => fs.writeSync(outFd, `${JSON.stringify(msg)}\n`);
let current = null;

// Everything the cells print goes over the message channel, so that it
// stays in order with the cell's end.
for (const name of ['stdout', 'stderr']) {
  process[name].write = (chunk, encoding, cb) => {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    send({ id: current ? current.id : null, t: name, text });
    if (typeof encoding === 'function') encoding();
    else if (typeof cb === 'function') cb();
    return true;
  };
}

const cellRequire = createRequire(`${process.cwd()}/`);
const cellModule = { exports: {} };
const sandbox = {
  console: new Console({ stdout: process.stdout, stderr: process.stderr }),
  process,
  require: cellRequire,
  module: cellModule,
  exports: cellModule.exports,
  Buffer,
  URL,
  URLSearchParams,
  TextEncoder,
  TextDecoder,
  AbortController,
  structuredClone,
  queueMicrotask,
  setTimeout,
  clearTimeout,
  setInterval,
  clearInterval,
  setImmediate,
  clearImmediate,
  ...(typeof fetch === 'function' ? { fetch } : {}),
  ...(typeof performance === 'object' ? { performance } : {}),
};
const context = vm.createContext(sandbox);

let ts = null;
function typescript() {
  if (ts) return ts;
  for (const where of ['typescript', '/usr/share/nodejs/typescript', '/usr/lib/node_modules/typescript']) {
    try {
      ts = require(where);
      return ts;
    } catch {
      // the next place
    }
  }
  throw Object.assign(new Error('TypeScript is not installed (Debian: node-typescript; npm: typescript)'), { name: 'TypeScriptMissing' });
}

function compile(code) {
  if (language !== 'typescript') return code;
  const t = typescript();
  return t.transpileModule(code, { compilerOptions: { target: t.ScriptTarget.ES2020, module: t.ModuleKind.CommonJS, esModuleInterop: true }, reportDiagnostics: false }).outputText;
}

/** A script of the cell; one with top-level await runs as an async function (its declarations are its own). */
function script(code) {
  try {
    return { script: new vm.Script(code, { filename: 'cell' }), async: false };
  } catch (err) {
    if (!(err instanceof SyntaxError) || !/await/.test(code)) throw err;
    return { script: new vm.Script(`(async () => {\n${code}\n})()`, { filename: 'cell' }), async: true };
  }
}

// While a cell awaits, SIGINT ends the wait; while it runs, vm's breakOnSigint stops it.
let interruptWait = null;
process.on('SIGINT', () => {
  if (interruptWait) interruptWait();
});

async function run(cell) {
  current = cell;
  try {
    const { script: s } = script(compile(cell.code));
    let value = s.runInContext(context, { breakOnSigint: true, displayErrors: false });
    if (value && typeof value.then === 'function') {
      value = await Promise.race([
        value,
        new Promise((_, reject) => {
          interruptWait = () => reject(Object.assign(new Error('Script execution was interrupted.'), { name: 'Interrupted' }));
        }),
      ]);
    }
    const done = { id: cell.id, t: 'done' };
    if (value !== undefined) done.result = util.inspect(value, { depth: 4, colors: false });
    send(done);
  } catch (err) {
    const e = err instanceof Error || (err && typeof err === 'object' && 'message' in err) ? err : { name: 'Error', message: String(err) };
    const interrupted = /Script execution (was )?interrupted/.test(String(e.message));
    send({
      id: cell.id,
      t: 'done',
      error: { name: interrupted ? 'KeyboardInterrupt' : String(e.name || 'Error'), value: String(e.message), traceback: String(e.stack || `${e.name}: ${e.message}`) },
    });
  } finally {
    interruptWait = null;
    current = null;
  }
}

const queue = [];
let running = false;
async function drain() {
  if (running) return;
  running = true;
  while (queue.length > 0) await run(queue.shift());
  running = false;
}

readline.createInterface({ input: fs.createReadStream(null, { fd: inFd }) }).on('line', (line) => {
  queue.push(JSON.parse(line));
  void drain();
}).on('close', () => process.exit(0));
