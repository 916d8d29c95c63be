// `sandbox.files`: the sandbox's filesystem, through envd's filesystem
// service and its `/files` HTTP route.
import { Code, ConnectError } from '@connectrpc/connect';
import { isInMemory, withUser, type UploadData } from '@paddock/envd-client';
import type { RequestOpts } from './config.js';
import { httpOptions, rpcOptions, type SandboxContext } from './context.js';
import { toEntryInfo, toEntryInfos, toWatchMessage, toWriteInfo } from './convert.js';
import { ENVD_FEATURES, atLeast, requireEnvd } from './envd-version.js';
import { fromEnvdHttpError, fromRpcError } from './error-mapping.js';
import { InvalidArgumentError, SandboxError } from './errors.js';
import { openStream } from './stream.js';
import type { EntryInfo, WriteInfo } from './types.js';
import { WatchHandle, type WatchEventCallback, type WatchExitCallback } from './watch-handle.js';

/**
 * Contents of a file to write: text, bytes, a Blob, or a stream (Web
 * `ReadableStream`, Node `Readable`, any async iterable of chunks), which is
 * sent as it is read.
 */
export type WriteData = UploadData;

/** One of several files to write with `files.write` or `files.writeFiles`. */
export interface WriteEntry {
  /** Target path; a relative path is under the user's home. */
  path: string;
  /** Contents of the file. */
  data: WriteData;
}

/** Options of every `files` method. */
export interface FilesystemRequestOpts extends RequestOpts {
  /** User whose view of the filesystem to use (permissions, home, owner of new files); envd's default user when omitted. */
  user?: string;
}

/** Options of `files.read`. */
export interface FilesystemReadOpts extends FilesystemRequestOpts {
  /** Ask for a gzip-compressed transfer; decompressed transparently. */
  gzip?: boolean;
}

/** Options of `files.write`. */
export interface FilesystemWriteOpts extends FilesystemRequestOpts {
  /** Stored with each file (as extended attributes) and reported in `EntryInfo.metadata`. */
  metadata?: Record<string, string>;
  /** Compress each file on the way (implies `useOctetStream`). */
  gzip?: boolean;
  /**
   * One raw request per file (sent side by side) instead of one multipart
   * request for all. By default raw when there is one file or a stream
   * among them, multipart for several in-memory files. Needs envd 0.5.7; an
   * older envd gets multipart, uncompressed.
   */
  useOctetStream?: boolean;
}

/** Options of `files.list`. */
export interface FilesystemListOpts extends FilesystemRequestOpts {
  /** How many levels to descend; 1 (the default) lists the directory itself. */
  depth?: number;
}

/** Options of `files.watchDir`. */
export interface WatchOpts extends FilesystemRequestOpts {
  /** Also watch subdirectories. */
  recursive?: boolean;
  /** Attach the entry after the change to each event. */
  includeEntry?: boolean;
  /** Allow watching a network mount. */
  allowNetworkMounts?: boolean;
  /** Longest the watch lasts, in ms. Default 60 000; 0 for no limit. */
  timeoutMs?: number;
  /** Called once when the watch ends. */
  onExit?: WatchExitCallback;
}

/** Default lifetime of a watch, as in E2B's SDK. */
const DEFAULT_WATCH_TIMEOUT_MS = 60_000;

/** Reads, writes and watches files in the sandbox. */
export class Filesystem {
  readonly #context: SandboxContext;

  constructor(context: SandboxContext) {
    this.#context = context;
  }

  /** Reads a file as text (the default), bytes, a Blob or a Web stream. */
  read(path: string, opts?: FilesystemReadOpts & { format?: 'text' }): Promise<string>;
  read(path: string, opts: FilesystemReadOpts & { format: 'bytes' }): Promise<Uint8Array>;
  read(path: string, opts: FilesystemReadOpts & { format: 'blob' }): Promise<Blob>;
  read(path: string, opts: FilesystemReadOpts & { format: 'stream' }): Promise<ReadableStream<Uint8Array>>;
  async read(
    path: string,
    opts: FilesystemReadOpts & { format?: 'text' | 'bytes' | 'blob' | 'stream' } = {},
  ): Promise<string | Uint8Array | Blob | ReadableStream<Uint8Array>> {
    try {
      const content = await this.#context.envd.download(path, {
        ...httpOptions(this.#context, opts),
        format: opts.format ?? 'text',
        user: opts.user,
        gzip: opts.gzip,
      });
      // Only envd-client's `node-stream` format gives a Readable, and it is never asked for here.
      return content as string | Uint8Array | Blob | ReadableStream<Uint8Array>;
    } catch (err) {
      throw fromEnvdHttpError(err, 'file');
    }
  }

  /** Writes one file, creating missing parent directories; an existing file is replaced. */
  write(path: string, data: WriteData, opts?: FilesystemWriteOpts): Promise<WriteInfo>;
  /** Writes several files in one go. */
  write(files: WriteEntry[], opts?: FilesystemWriteOpts): Promise<WriteInfo[]>;
  async write(
    pathOrFiles: string | WriteEntry[],
    dataOrOpts?: WriteData | FilesystemWriteOpts,
    maybeOpts?: FilesystemWriteOpts,
  ): Promise<WriteInfo | WriteInfo[]> {
    const single = typeof pathOrFiles === 'string';
    const files = single ? [{ path: pathOrFiles, data: dataOrOpts as WriteData }] : pathOrFiles;
    const opts = (single ? maybeOpts : (dataOrOpts as FilesystemWriteOpts | undefined)) ?? {};
    if (files.length === 0) return [];
    if (opts.metadata && Object.keys(opts.metadata).length > 0) {
      requireEnvd(this.#context.envdVersion, ENVD_FEATURES.fileMetadata, 'file metadata');
    }
    const raw =
      atLeast(this.#context.envdVersion, ENVD_FEATURES.octetStreamUpload) &&
      (opts.gzip || (opts.useOctetStream ?? (files.length === 1 || files.some((f) => !isInMemory(f.data)))));
    const written = await this.#context.envd
      .upload(files, {
        ...httpOptions(this.#context, opts),
        user: opts.user,
        metadata: opts.metadata,
        gzip: raw && opts.gzip === true,
        encoding: raw ? 'octet-stream' : 'multipart',
      })
      .then(
        (entries) => entries.map(toWriteInfo),
        (err: unknown) => {
          throw fromEnvdHttpError(err, 'file');
        },
      );
    if (!single) return written;
    const [first] = written;
    if (!first) throw new SandboxError(`envd reported nothing written for '${pathOrFiles}'`);
    return first;
  }

  /** Writes several files in one go; the same as `write` with an array. */
  writeFiles(files: WriteEntry[], opts?: FilesystemWriteOpts): Promise<WriteInfo[]> {
    return this.write(files, opts);
  }

  /** Entries of a directory, depth-first in name order, `depth` levels down. */
  async list(path: string, opts: FilesystemListOpts = {}): Promise<EntryInfo[]> {
    const depth = opts.depth ?? 1;
    if (!Number.isInteger(depth) || depth < 1) {
      throw new InvalidArgumentError(`depth must be a whole number of at least 1, got ${depth}`);
    }
    try {
      const { entries } = await this.#context.envd.filesystem.listDir({ path, depth }, rpcOptions(this.#context, opts));
      return toEntryInfos(entries);
    } catch (err) {
      throw fromRpcError(err, 'file');
    }
  }

  /** Whether something exists at `path`. */
  async exists(path: string, opts?: FilesystemRequestOpts): Promise<boolean> {
    return succeedsUnless(Code.NotFound, () => this.#context.envd.filesystem.stat({ path }, rpcOptions(this.#context, opts)));
  }

  /** What is at `path`. Throws `FileNotFoundError` when nothing is. */
  async getInfo(path: string, opts?: FilesystemRequestOpts): Promise<EntryInfo> {
    try {
      const { entry } = await this.#context.envd.filesystem.stat({ path }, rpcOptions(this.#context, opts));
      return toEntryInfo(requireEntry(entry, 'Stat', path));
    } catch (err) {
      throw fromRpcError(err, 'file');
    }
  }

  /** Creates a directory and its missing parents. False when it already exists. */
  async makeDir(path: string, opts?: FilesystemRequestOpts): Promise<boolean> {
    return succeedsUnless(Code.AlreadyExists, () => this.#context.envd.filesystem.makeDir({ path }, rpcOptions(this.#context, opts)));
  }

  /** Moves a file or directory; returns it at its new path. */
  async rename(oldPath: string, newPath: string, opts?: FilesystemRequestOpts): Promise<EntryInfo> {
    try {
      const { entry } = await this.#context.envd.filesystem.move(
        { source: oldPath, destination: newPath },
        rpcOptions(this.#context, opts),
      );
      return toEntryInfo(requireEntry(entry, 'Move', newPath));
    } catch (err) {
      throw fromRpcError(err, 'file');
    }
  }

  /** Removes a file or a directory with everything in it. Nothing at `path` is not an error. */
  async remove(path: string, opts?: FilesystemRequestOpts): Promise<void> {
    try {
      await this.#context.envd.filesystem.remove({ path }, rpcOptions(this.#context, opts));
    } catch (err) {
      throw fromRpcError(err, 'file');
    }
  }

  /**
   * Watches a directory. Resolves once the watch is in place, so changes made
   * after that are reported; `onEvent` runs for each, in order.
   */
  async watchDir(path: string, onEvent: WatchEventCallback, opts: WatchOpts = {}): Promise<WatchHandle> {
    if (opts.includeEntry) requireEnvd(this.#context.envdVersion, ENVD_FEATURES.watchEntryInfo, 'watchDir with includeEntry');
    if (opts.allowNetworkMounts) {
      requireEnvd(this.#context.envdVersion, ENVD_FEATURES.watchNetworkMounts, 'watchDir with allowNetworkMounts');
    }
    const request = {
      path,
      recursive: opts.recursive ?? false,
      includeEntry: opts.includeEntry ?? false,
      allowNetworkMounts: opts.allowNetworkMounts ?? false,
    };
    const stream = await openStream((options) => this.#context.envd.filesystem.watchDir(request, options), toWatchMessage, {
      requestTimeoutMs: opts.requestTimeoutMs ?? this.#context.requestTimeoutMs,
      timeoutMs: opts.timeoutMs ?? DEFAULT_WATCH_TIMEOUT_MS,
      signal: opts.signal,
      callOptions: opts.user === undefined ? undefined : withUser(opts.user),
      subject: 'file',
    });
    if (stream.first.kind !== 'start') {
      stream.close();
      throw new SandboxError(`envd answered WatchDir on '${path}' without confirming the watch first`);
    }
    return new WatchHandle(stream, onEvent, opts.onExit);
  }
}

function requireEntry<E>(entry: E | undefined, method: string, path: string): E {
  if (entry === undefined) throw new SandboxError(`envd answered ${method} on '${path}' without the entry`);
  return entry;
}

/** True when `call` succeeds, false when it fails with `code`; any other failure throws the SDK's error for it. */
async function succeedsUnless(code: Code, call: () => Promise<unknown>): Promise<boolean> {
  try {
    await call();
    return true;
  } catch (err) {
    if (ConnectError.from(err).code === code) return false;
    throw fromRpcError(err, 'file');
  }
}
