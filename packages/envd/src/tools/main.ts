// envd's build tools (dist/sandbox/envd/tools.cjs): the steps of a template
// build that change the image's files, run inside the build container by
// envd's own node (`envdToolCommand` in ../index.ts), so that they work on
// any image, one without a shell, tar or useradd among them.
//
//   tools.cjs copy --archive FILE --source PATH --dest PATH [--workdir DIR] [--user NAME]
//                  [--owner USER[:GROUP]] [--mode OCTAL] [--max-bytes N] [--root DIR --id-shift N
//                  [--unpacked DIR --unpack-scratch DIR]]
//       in the image at / (a build container), or with --root in the image at DIR on the
//       host (the runtime's overlay of a new layer), its ids from host id --id-shift on;
//       --unpacked: the archive kept unpacked there (made by the first copy that names it)
//   tools.cjs user NAME      prints `uid gid home`, creating the user if the image has none of that name
//   tools.cjs step-process --root DIR --id-shift N --default-user NAME [--user NAME] [--cwd DIR]
//                  [--default-workdir DIR]
//       prints (JSON) how a build step's command runs as the build container's own process:
//       its user's ids and home, its working directory, the shell for a command line
//
// Success exits 0; a failure prints one line, `<tool>: <what failed>`, on
// stderr and exits 1.
//
// The runtime, which places COPY steps on the host, loads the same file in a
// worker thread of its own node instead (workerData `{ serve: true }`): a
// copy is then a message, `{ tool: 'copy', args }`, answered `{}` or
// `{ error }` with the same line, and no node process starts and loads
// this bundle for each one; a `step-process` is answered `{ value }`.
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { copy } from './copy.js';
import { hostRoot, ownRoot } from './image-root.js';
import { stepProcess } from './step-process.js';
import { user } from './user.js';

const usage =
  'usage: tools.cjs copy --archive FILE --source PATH --dest PATH [--workdir DIR] [--user NAME] [--owner USER[:GROUP]] [--mode OCTAL] [--max-bytes N] [--root DIR --id-shift N [--unpacked DIR --unpack-scratch DIR]] | tools.cjs user NAME | tools.cjs step-process --root DIR --id-shift N --default-user NAME [--user NAME] [--cwd DIR] [--default-workdir DIR]';

/** A whole number of at least 0 given as option `name`. */
function count(name: string, value: string): number {
  if (!/^\d{1,15}$/.test(value)) throw new Error(`--${name} '${value}' is not a whole number`);
  return Number(value);
}

/** Runs `tool`; what it answers (the step-process tool's description), else undefined. */
function run(tool: string | undefined, args: string[]): unknown {
  switch (tool) {
    case 'copy': {
      const str = { type: 'string' } as const;
      const { values } = parseArgs({
        args,
        options: { archive: str, source: str, dest: str, workdir: str, user: str, owner: str, mode: str, 'max-bytes': str, root: str, 'id-shift': str, unpacked: str, 'unpack-scratch': str },
        strict: true,
        allowPositionals: false,
      });
      const { archive, source, dest, root, 'id-shift': idShift, 'max-bytes': maxBytes, unpacked, 'unpack-scratch': unpackScratch, ...rest } = values;
      if (archive === undefined || source === undefined || dest === undefined) throw new Error('--archive, --source and --dest are required');
      if ((root === undefined) !== (idShift === undefined)) throw new Error('--root and --id-shift go together');
      if ((unpacked === undefined) !== (unpackScratch === undefined)) throw new Error('--unpacked and --unpack-scratch go together');
      if (unpacked !== undefined && root === undefined) throw new Error('--unpacked is for a copy on the host, with --root');
      const image = root === undefined ? ownRoot : hostRoot(root, count('id-shift', idShift!));
      copy(image, { ...rest, archive, source, dest, ...(maxBytes !== undefined ? { maxBytes: count('max-bytes', maxBytes) } : {}), ...(unpacked !== undefined ? { unpacked, unpackScratch: unpackScratch! } : {}) });
      return;
    }
    case 'step-process': {
      const str = { type: 'string' } as const;
      const { values } = parseArgs({
        args,
        options: { root: str, 'id-shift': str, user: str, 'default-user': str, cwd: str, 'default-workdir': str },
        strict: true,
        allowPositionals: false,
      });
      const { root, 'id-shift': idShift, 'default-user': defaultUser, 'default-workdir': defaultWorkdir, user: name, cwd } = values;
      if (root === undefined || idShift === undefined || defaultUser === undefined) throw new Error('--root, --id-shift and --default-user are required');
      return stepProcess(hostRoot(root, count('id-shift', idShift)), {
        defaultUser,
        ...(name !== undefined ? { user: name } : {}),
        ...(cwd !== undefined ? { cwd } : {}),
        ...(defaultWorkdir !== undefined ? { defaultWorkdir } : {}),
      });
    }
    case 'user': {
      const { positionals } = parseArgs({ args, options: {}, strict: true, allowPositionals: true });
      if (positionals.length !== 1) throw new Error('takes one user name');
      process.stdout.write(`${user(positionals[0]!)}\n`);
      return;
    }
    default:
      throw new Error(tool === undefined ? usage : `no tool '${tool}'; ${usage}`);
  }
}

/** A failure as the one line the tools print. */
const failure = (tool: string | undefined, err: unknown) => `${tool ?? 'tools'}: ${(err as Error).message.replace(/\s*\n\s*/g, ' ')}`;

if (!isMainThread && (workerData as { serve?: unknown } | null)?.serve === true) {
  // Not the user tool: it answers on stdout, which a worker shares with the runtime.
  parentPort!.on('message', (msg: { tool?: unknown; args?: unknown }) => {
    const tool = typeof msg.tool === 'string' ? msg.tool : undefined;
    try {
      if ((tool !== 'copy' && tool !== 'step-process') || !Array.isArray(msg.args) || !msg.args.every((a) => typeof a === 'string')) throw new Error('a worker runs copy or step-process, with args as strings');
      const value = run(tool, msg.args);
      parentPort!.postMessage(value === undefined ? {} : { value });
    } catch (err) {
      parentPort!.postMessage({ error: failure(tool, err) });
    }
  });
} else {
  const [tool, ...args] = process.argv.slice(2);
  try {
    const value = run(tool, args);
    if (value !== undefined) process.stdout.write(`${JSON.stringify(value)}\n`);
  } catch (err) {
    process.stderr.write(`${failure(tool, err)}\n`);
    process.exitCode = 1;
  }
}
