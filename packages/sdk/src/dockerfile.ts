// Node only (the package's `browser` field maps it to dockerfile-browser.ts):
// a Dockerfile read as the steps of a template build (the v2 build API's
// RUN, COPY, ENV, WORKDIR and USER, a start command, and where it starts
// from), with Docker's meaning kept where the API can carry it and a clear
// error where it cannot. `Template().fromDockerfile` and the CLI's
// `paddock template build` both read Dockerfiles through it.
import { readFileSync, statSync } from 'node:fs';
import { DockerfileParser, type Instruction, type JSONInstruction, type ModifiableInstruction, type PropertyInstruction } from 'dockerfile-ast';
import { InvalidArgumentError } from './errors.js';
import { shellCommand } from './shell.js';

/** A step of the build request, with the Dockerfile line it came from; a COPY also says which files of the context it takes and whether it was an ADD. */
export type DockerfileStep =
  | {
      /** The build API's step type. */
      type: 'RUN' | 'ENV' | 'WORKDIR' | 'USER';
      /** The arguments of the build API's step of this type. */
      args: string[];
      /** The Dockerfile's line the step came from, counted from 1. */
      line: number;
    }
  | {
      /** A COPY or an ADD, each source a step of its own. */
      type: 'COPY';
      /** The build API's COPY arguments: source, destination, owner, and the mode when given. */
      args: string[];
      /** The Dockerfile's line the step came from, counted from 1. */
      line: number;
      /** The source as the Dockerfile names it, relative to the build context. */
      source: string;
      /** Whether it was an ADD. */
      add: boolean;
    };

/** What a Dockerfile makes of a build: its base, its steps, its start command, and notes for the person building. */
export interface DockerfilePlan {
  /** `FROM e2bdev/base` is the server's base template; anything else is an image. */
  from:
    | {
        /** The image to build on. */
        fromImage: string;
      }
    | {
        /** The template of the server to build on. */
        fromTemplate: string;
      };
  /** The build steps, in order; USER and WORKDIR steps are added to start and end as E2B's templates expect. */
  steps: DockerfileStep[];
  /** From the last CMD and ENTRYPOINT, as one shell command line. */
  startCmd?: string;
  /** From the last HEALTHCHECK CMD: the command that says a sandbox is ready. */
  readyCmd?: string;
  /** What was ignored or could not be resolved, one line each, for the person building. */
  notes: string[];
}

/** The images the SDKs call E2B's base, which a Paddock server's `base` template stands in for. */
const E2B_BASE_IMAGES = new Set(['e2bdev/base', 'e2bdev/base:latest', 'docker.io/e2bdev/base', 'docker.io/e2bdev/base:latest']);
/** Instructions that say something about running the image that a template has no place for. */
const IGNORED = new Set(['EXPOSE', 'LABEL', 'MAINTAINER', 'STOPSIGNAL', 'VOLUME', 'ONBUILD']);
const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** What marks a source as fetched from the network rather than read from the context. */
const REMOTE_SOURCE = /^([a-z][a-z0-9+.-]*:\/\/|git@)/i;

/** A Dockerfile problem, named by its line. */
function problem(file: string, line: number, message: string): InvalidArgumentError {
  return new InvalidArgumentError(`${file}:${line}: ${message}`);
}

/**
 * Docker's word processing of an instruction's argument: quotes and the
 * escape character are taken out, and `$NAME`, `${NAME}`, `${NAME:-word}`,
 * `${NAME:+word}` (and the forms without the colon) are replaced. A
 * variable not known here (the base image may set it) is left as written,
 * and reported through `unknown`.
 */
function expandWord(raw: string, lookup: (name: string) => string | undefined, escape = '\\', unknown?: (name: string) => void, quotes = true): string {
  let out = '';
  let i = 0;
  const expand = (): string => {
    // At a '$'.
    const next = raw[i + 1];
    if (next === '{') {
      const close = raw.indexOf('}', i + 2);
      if (close < 0) return raw[i++]!;
      const body = raw.slice(i + 2, close);
      const whole = raw.slice(i, close + 1);
      i = close + 1;
      const m = /^([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-+])(.*))?$/s.exec(body);
      if (!m) return whole;
      const name = m[1]!;
      const [colon, op, word = ''] = [m[2], m[3], m[4]];
      const value = lookup(name);
      if (op === undefined) {
        if (value === undefined) unknown?.(name);
        return value ?? whole;
      }
      const set = value !== undefined && (colon !== ':' || value !== '');
      const expandedWord = () => expandWord(word, lookup, escape, unknown, false);
      if (op === '-') return set ? value : expandedWord();
      return set ? expandedWord() : '';
    }
    const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(raw.slice(i + 1));
    if (!m) return raw[i++]!;
    i += 1 + m[0].length;
    const value = lookup(m[0]);
    if (value === undefined) unknown?.(m[0]);
    return value ?? `$${m[0]}`;
  };
  let quote: "'" | '"' | undefined;
  while (i < raw.length) {
    const c = raw[i]!;
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else out += c;
      i++;
    } else if (c === escape && i + 1 < raw.length && (quote === undefined || ['"', '$', escape].includes(raw[i + 1]!))) {
      out += raw[i + 1];
      i += 2;
    } else if (quotes && (c === '"' || (c === "'" && quote === undefined))) {
      quote = quote === c ? undefined : (c as "'" | '"');
      i++;
    } else if (c === '$') {
      out += expand();
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** The form an instruction's arguments are written in: a JSON array of strings, or a shell command line. */
function execForm(file: string, ins: Instruction): string[] | undefined {
  const text = ins.getArgumentsContent()?.trim() ?? '';
  if (!text.startsWith('[')) return undefined;
  let words: unknown;
  try {
    words = JSON.parse(text);
  } catch {
    // Docker reads a line that is not valid JSON as the shell form.
    return undefined;
  }
  if (!Array.isArray(words) || !words.every((w) => typeof w === 'string')) {
    throw problem(file, line(ins), `${ins.getKeyword()} in JSON form takes an array of strings`);
  }
  return words;
}

const line = (ins: Instruction) => ins.getRange().start.line + 1;

/** The last CMD and ENTRYPOINT as the command line that starts in every sandbox of the template. */
function startCommand(
  entrypoint: { exec?: string[]; shell?: string } | undefined,
  cmd: { exec?: string[]; shell?: string } | undefined,
  notes: string[],
): string | undefined {
  const words = (c: { exec?: string[]; shell?: string }) => c.exec ?? ['/bin/sh', '-c', c.shell!];
  if (entrypoint?.shell !== undefined) {
    if (cmd) notes.push('CMD is not used: an ENTRYPOINT in shell form takes no arguments');
    return entrypoint.shell;
  }
  if (entrypoint?.exec) {
    const argv = [...entrypoint.exec, ...(cmd ? words(cmd) : [])];
    return argv.length > 0 ? shellCommand(argv) : undefined;
  }
  if (cmd?.shell !== undefined) return cmd.shell;
  return cmd?.exec && cmd.exec.length > 0 ? shellCommand(cmd.exec) : undefined;
}

/** Options of `parseDockerfile`. */
export interface DockerfileParseOptions {
  /** How the Dockerfile is named in errors. */
  file?: string;
  /** `--build-arg` values; they override the ARG defaults. */
  buildArgs?: Record<string, string>;
}

/**
 * Reads a Dockerfile's text into the steps of a build. Multi-stage builds,
 * ADD of a URL, RUN --mount, SHELL and instructions Docker does not know are
 * refused with an `InvalidArgumentError` naming their line; EXPOSE, LABEL
 * and the like are ignored with a note. HEALTHCHECK CMD is the ready command:
 * what says a sandbox is ready.
 */
export function parseDockerfile(text: string, opts: DockerfileParseOptions = {}): DockerfilePlan {
  const file = opts.file ?? 'Dockerfile';
  const buildArgs = opts.buildArgs ?? {};
  const df = DockerfileParser.parse(text);
  const escape = df.getEscapeCharacter();
  const instructions = df.getInstructions();
  const notes: string[] = [];
  const froms = instructions.filter((i) => i.getKeyword() === 'FROM');
  if (froms.length === 0) throw new InvalidArgumentError(`${file} has no FROM instruction`);
  if (froms.length > 1) {
    throw problem(file, line(froms[1]!), `multi-stage builds are not supported (FROM on lines ${froms.map(line).join(', ')}); a template is built from one FROM`);
  }

  // ARGs before FROM are only seen by FROM; ARG and ENV after it by what follows them.
  const globalArgs = new Map<string, string | undefined>();
  const args = new Map<string, string | undefined>();
  const env = new Map<string, string>();
  const used = new Set<string>();
  const unresolved = new Set<string>();
  let afterFrom = false;
  const lookup = (name: string) => (afterFrom ? (env.get(name) ?? args.get(name)) : globalArgs.get(name));
  const expand = (ins: Instruction, raw: string, quotes = true) =>
    expandWord(raw, lookup, escape, (name) => {
      const key = `${line(ins)}:${name}`;
      if (unresolved.has(key)) return;
      unresolved.add(key);
      // The server expands an ENV value's variables from the build's environment (the image's included).
      const fate = ins.getKeyword() === 'ENV' ? "the build takes it from the image's environment" : 'it is left as written';
      notes.push(`${file}:${line(ins)}: $${name} is not set by the Dockerfile (the base image may set it); ${fate}`);
    }, quotes);

  let from: DockerfilePlan['from'] | undefined;
  const steps: DockerfileStep[] = [];
  let userSet = false;
  let workdirSet = false;
  let entrypoint: { exec?: string[]; shell?: string } | undefined;
  let cmd: { exec?: string[]; shell?: string } | undefined;
  let readyCmd: string | undefined;

  for (const ins of instructions) {
    const keyword = ins.getKeyword();
    const at = line(ins);
    if (!afterFrom && keyword !== 'ARG' && keyword !== 'FROM') throw problem(file, at, `${keyword} comes before FROM; only ARG may`);
    switch (keyword) {
      case 'ARG': {
        for (const p of (ins as PropertyInstruction).getProperties()) {
          const name = p.getName();
          if (!VAR_NAME.test(name)) throw problem(file, at, `'${name}' is not a variable name`);
          const raw = p.getUnescapedValue();
          used.add(name);
          const value = buildArgs[name] ?? (raw !== null ? expand(ins, raw) : afterFrom ? globalArgs.get(name) : undefined);
          (afterFrom ? args : globalArgs).set(name, value);
        }
        break;
      }
      case 'FROM': {
        const flags = (ins as ModifiableInstruction).getFlags();
        for (const f of flags) {
          if (f.getName() === 'platform') notes.push(`${file}:${at}: FROM --platform is ignored; the image is pulled for this machine`);
          else throw problem(file, at, `FROM has no flag --${f.getName()}`);
        }
        const words = (ins as ModifiableInstruction).getArguments().map((a) => a.getValue());
        if (words.length !== 1 && !(words.length === 3 && words[1]!.toUpperCase() === 'AS')) throw problem(file, at, 'FROM takes an image, optionally followed by AS <name>');
        const image = expand(ins, words[0]!);
        if (!image) throw problem(file, at, `FROM '${words[0]}' names no image`);
        from = E2B_BASE_IMAGES.has(image) ? { fromTemplate: 'base' } : { fromImage: image };
        afterFrom = true;
        // E2B's base image, which the base template stands in for, builds as root in /, as Docker would.
        if ('fromTemplate' in from) steps.push({ type: 'USER', args: ['root'], line: at }, { type: 'WORKDIR', args: ['/'], line: at });
        break;
      }
      case 'RUN': {
        const flags = (ins as ModifiableInstruction).getFlags();
        if (flags.length > 0) throw problem(file, at, `RUN --${flags[0]!.getName()} is not supported`);
        const exec = execForm(file, ins);
        let command: string;
        if (exec) {
          if (exec.length === 0) throw problem(file, at, 'RUN has an empty command');
          command = shellCommand(exec);
        } else {
          command = (ins.getArgumentsContent() ?? '').trim();
          // `RUN <<EOF` alone runs the here-document as the script; other here-documents are the shell's.
          const heredoc = /^<<-?(["']?)([A-Za-z_][A-Za-z0-9_]*)\1[ \t]*\n([\s\S]*)\n[ \t]*\2[ \t]*$/.exec(command);
          if (heredoc) command = heredoc[3]!;
        }
        if (!command.trim()) throw problem(file, at, 'RUN has an empty command');
        // Docker gives a RUN the ARGs in scope as environment variables; an ENV of the same name wins.
        const exported = [...args].filter(([k, v]) => v !== undefined && !env.has(k)).map(([k, v]) => `${k}=${v}`);
        steps.push({ type: 'RUN', args: [exported.length > 0 ? `export ${shellCommand(exported)}; ${command}` : command], line: at });
        break;
      }
      case 'COPY':
      case 'ADD': {
        const add = keyword === 'ADD';
        let owner = 'root';
        let mode: string | undefined;
        for (const f of (ins as JSONInstruction).getFlags()) {
          const name = f.getName();
          const value = f.getValue() ?? '';
          if (name === 'chown') owner = expand(ins, value);
          else if (name === 'chmod') {
            if (!/^[0-7]{3,4}$/.test(value)) throw problem(file, at, `${keyword} --chmod=${value}: give an octal mode like 0755`);
            mode = value.padStart(4, '0');
          } else if (name === 'from') throw problem(file, at, `${keyword} --from=${value} copies from another stage or image; multi-stage builds are not supported`);
          else if (name === 'link') notes.push(`${file}:${at}: ${keyword} --link is ignored; every step is a layer of its own`);
          else throw problem(file, at, `${keyword} --${name} is not supported`);
        }
        if (!owner) throw problem(file, at, `${keyword} --chown needs a user`);
        const exec = execForm(file, ins);
        if (!exec && /^<</.test((ins.getArgumentsContent() ?? '').trim())) throw problem(file, at, `${keyword} from a here-document is not supported; write the file into the build context`);
        const words = exec ? exec.map((w) => expand(ins, w, false)) : (ins as JSONInstruction).getArguments().map((a) => expand(ins, a.getValue()));
        if (words.length < 2) throw problem(file, at, `${keyword} needs a source and a destination`);
        const dest = words.at(-1)!;
        const sources = words.slice(0, -1);
        if (sources.length > 1 && !dest.endsWith('/')) throw problem(file, at, `${keyword} of several sources needs a destination directory ending in '/' (not '${dest}')`);
        for (const source of sources) {
          if (REMOTE_SOURCE.test(source)) {
            throw problem(file, at, `${keyword} of the URL '${source}' is not supported; download it in a RUN step (curl or wget) instead`);
          }
          steps.push({ type: 'COPY', args: [source, dest, owner, ...(mode ? [mode] : [])], line: at, source, add });
        }
        break;
      }
      case 'ENV': {
        const vars: string[] = [];
        for (const p of (ins as PropertyInstruction).getProperties()) {
          const name = p.getName();
          if (!VAR_NAME.test(name)) throw problem(file, at, `'${name}' is not an environment variable name`);
          const raw = p.getUnescapedValue();
          if (raw === null) throw problem(file, at, `ENV ${name} has no value`);
          const value = expand(ins, raw);
          env.set(name, value);
          vars.push(name, value);
        }
        if (vars.length === 0) throw problem(file, at, 'ENV needs NAME=value');
        steps.push({ type: 'ENV', args: vars, line: at });
        break;
      }
      case 'WORKDIR': {
        const path = expand(ins, ins.getArgumentsContent()?.trim() ?? '');
        if (!path) throw problem(file, at, 'WORKDIR needs a path');
        steps.push({ type: 'WORKDIR', args: [path], line: at });
        workdirSet = true;
        break;
      }
      case 'USER': {
        const spec = expand(ins, ins.getArgumentsContent()?.trim() ?? '');
        if (!spec) throw problem(file, at, 'USER needs a user');
        const [user, group] = spec.split(':');
        if (group !== undefined) notes.push(`${file}:${at}: USER ${spec}: the group is not used; processes run with ${user}'s own groups`);
        steps.push({ type: 'USER', args: [user!], line: at });
        userSet = true;
        break;
      }
      case 'CMD':
      case 'ENTRYPOINT': {
        const exec = execForm(file, ins);
        const form = exec ? { exec } : { shell: (ins.getArgumentsContent() ?? '').trim() };
        if (keyword === 'CMD') cmd = form;
        else entrypoint = form;
        break;
      }
      case 'HEALTHCHECK': {
        // Docker's check that a container is healthy is the template's check that a sandbox is ready.
        const flags = (ins as ModifiableInstruction).getFlags().map((f) => `--${f.getName()}${f.getValue() === null ? '' : `=${f.getValue()}`}`);
        if (flags.length > 0) notes.push(`${file}:${at}: HEALTHCHECK ${flags.join(' ')} is ignored; the ready command runs until it succeeds`);
        const rest = (ins.getArgumentsContent() ?? '').trim();
        if (/^NONE$/i.test(rest)) {
          readyCmd = undefined;
          break;
        }
        const command = /^CMD\s+(.*)$/is.exec(rest)?.[1]?.trim();
        if (!command) throw problem(file, at, 'HEALTHCHECK takes CMD <command> or NONE');
        let exec: string[] | undefined;
        if (command.startsWith('[')) {
          try {
            const parsed: unknown = JSON.parse(command);
            if (Array.isArray(parsed) && parsed.every((w) => typeof w === 'string')) exec = parsed;
          } catch {
            // Not JSON: a shell command that starts with '['.
          }
        }
        readyCmd = exec ? shellCommand(exec.map((w) => expand(ins, w, false))) : expand(ins, command, false);
        break;
      }
      case 'SHELL':
        throw problem(file, at, 'SHELL is not supported; RUN steps run with the image\'s bash (or sh)');
      default:
        if (IGNORED.has(keyword)) notes.push(`${file}:${at}: ${keyword} is ignored; a template has no place for it`);
        else throw problem(file, at, `unknown instruction '${ins.getInstruction()}'`);
    }
  }

  // As E2B's templates are: processes run as `user` in its home unless the Dockerfile said otherwise.
  const at = instructions.at(-1) ? line(instructions.at(-1)!) : 1;
  if (!userSet) steps.push({ type: 'USER', args: ['user'], line: at });
  if (!workdirSet) steps.push({ type: 'WORKDIR', args: ['/home/user'], line: at });

  for (const name of Object.keys(buildArgs)) if (!used.has(name)) notes.push(`--build-arg ${name} is not used: the Dockerfile declares no ARG ${name}`);
  const startCmd = startCommand(entrypoint, cmd, notes);
  return { from: from!, steps, ...(startCmd ? { startCmd } : {}), ...(readyCmd ? { readyCmd } : {}), notes };
}

/**
 * A Dockerfile's text and how to name it: `contentOrPath` is read as a file
 * when it names one (relative to the working directory), else taken as the
 * Dockerfile itself, as E2B's `fromDockerfile` does.
 */
export function readDockerfile(contentOrPath: string): { text: string; file: string } {
  // A Dockerfile's text has a newline or is at least no file's name.
  let isFile = false;
  try {
    isFile = !contentOrPath.includes('\n') && statSync(contentOrPath, { throwIfNoEntry: false })?.isFile() === true;
  } catch {
    // Not a name a file can have (too long, a NUL in it): the text itself.
  }
  if (isFile) return { text: readFileSync(contentOrPath, 'utf8'), file: contentOrPath };
  return { text: contentOrPath, file: 'Dockerfile' };
}
