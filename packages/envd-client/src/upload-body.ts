import { joinBytes } from './bytes.js';

/**
 * Contents of a file to upload. In-memory kinds (string, bytes, Blob) are
 * sent with a known length; streams (a Web `ReadableStream`, a Node
 * `Readable` or any async iterable of chunks) are sent chunk by chunk as
 * they are read, never gathered in memory.
 */
export type UploadData =
  | string
  | Uint8Array
  | ArrayBuffer
  | Blob
  | ReadableStream<Uint8Array>
  // Return and next types spelled out: the library defaults are `any`.
  | AsyncIterable<Uint8Array | string, unknown, undefined>;

/** A piece of a request body: in memory, or a stream of chunks. */
type Piece = Uint8Array | Blob | AsyncIterable<Uint8Array>;

const encoder = new TextEncoder();

// Checks go by shape rather than instanceof: Buffers and streams may come from
// another realm (a VM context, a test runner), where instanceof fails.
function isBlob(data: unknown): data is Blob {
  return typeof data === 'object' && data !== null && typeof (data as Blob).stream === 'function' && typeof (data as Blob).size === 'number';
}

function isReadableStream(data: unknown): data is ReadableStream<Uint8Array> {
  return typeof data === 'object' && data !== null && typeof (data as ReadableStream).getReader === 'function';
}

function isArrayBuffer(data: unknown): data is ArrayBuffer {
  return Object.prototype.toString.call(data) === '[object ArrayBuffer]';
}

function toPiece(data: UploadData): Piece {
  if (typeof data === 'string') return encoder.encode(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (isArrayBuffer(data)) return new Uint8Array(data);
  if (isBlob(data)) return data;
  if (isReadableStream(data)) return readerChunks(data);
  return iterableChunks(data as AsyncIterable<Uint8Array | string, unknown, undefined>);
}

async function* readerChunks(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  // A reader rather than `for await`: browsers' ReadableStream is not always async-iterable.
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

async function* iterableChunks(source: AsyncIterable<Uint8Array | string, unknown, undefined>): AsyncGenerator<Uint8Array> {
  for await (const chunk of source) {
    if (typeof chunk === 'string') yield encoder.encode(chunk);
    else if (ArrayBuffer.isView(chunk)) yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    else throw new TypeError(`upload stream yielded ${Object.prototype.toString.call(chunk)}; expected bytes or strings`);
  }
}

function isStreamPiece(piece: Piece): piece is AsyncIterable<Uint8Array> {
  return Symbol.asyncIterator in piece;
}

/** Whether sending `data` needs no reading from a stream, so it can be bounded by a timeout. */
export function isInMemory(data: UploadData): boolean {
  return typeof data === 'string' || ArrayBuffer.isView(data) || isArrayBuffer(data) || isBlob(data);
}

export interface RequestBody {
  /** The body as fetch takes it (made when read, where that costs a copy or a stream; read it once). */
  readonly body: Uint8Array | Blob | ReadableStream<Uint8Array>;
  /** fetch needs `duplex: 'half'` for a stream body. */
  streaming: boolean;
  /** Byte length of a stream body known in advance: sent as Content-Length instead of chunked. */
  length?: number;
  /** The same body when it is all bytes in memory, as the arrays it is made of (views, not copies). */
  pieces?: Uint8Array[];
}

/**
 * A body made of `pieces` in order. All in memory, so that fetch sends a
 * Content-Length and browsers can send it: bytes alone as one array, which
 * fetch writes out as it is (a Blob is read back in chunks, each copied),
 * with a Blob among them as a Blob. Any stream among them: a stream that
 * pulls from each piece only as fast as the connection takes it.
 */
function concatBody(pieces: Piece[], sliceBytes: boolean): RequestBody {
  if (pieces.some(isStreamPiece)) return { body: pullStream(concatChunks(pieces)), streaming: true };
  if (pieces.every((p) => ArrayBuffer.isView(p))) {
    const bytes = pieces as Uint8Array[];
    const length = bytes.reduce((n, p) => n + p.length, 0);
    // Made only if fetch sends it: over http1.ts the pieces go as they are.
    if (sliceBytes && length >= STREAM_FROM) {
      return {
        get body() {
          return pullStream(slices(bytes));
        },
        streaming: true,
        length,
        pieces: bytes,
      };
    }
    return {
      get body() {
        return concatBytes(bytes);
      },
      streaming: false,
      pieces: bytes,
    };
  }
  return { body: new Blob(pieces as (Uint8Array | Blob)[]), streaming: false };
}

/**
 * Whether the built-in fetch sends a stream body, with a declared length,
 * over HTTP/1.1, as Node's does. Browsers' fetch streams request bodies
 * over HTTP/2 at best, so there bytes go to fetch whole.
 */
export const builtinFetchSlicesBytes = typeof process !== 'undefined' && typeof process.versions?.node === 'string';

/**
 * With `sliceBytes`, bytes from this size on are sent as a stream of slices
 * of the caller's arrays, with their length declared. Node's fetch copies a
 * byte body twice before it sends it (two fresh 256 MiB arrays for a 256 MiB
 * file, the slowest part of the upload); slices are views, never copies.
 */
const STREAM_FROM = 64 * 1024;
const SLICE = 1024 * 1024;

function* slices(pieces: Uint8Array[]): Generator<Uint8Array> {
  for (const piece of pieces) for (let at = 0; at < piece.length; at += SLICE) yield piece.subarray(at, at + SLICE);
}

function concatBytes(pieces: Uint8Array[]): Uint8Array {
  return pieces.length === 1 ? pieces[0]! : joinBytes(pieces);
}

async function* concatChunks(pieces: Piece[]): AsyncGenerator<Uint8Array> {
  for (const piece of pieces) {
    if (ArrayBuffer.isView(piece)) yield piece as Uint8Array;
    else if (isStreamPiece(piece)) yield* piece;
    else yield* readerChunks(piece.stream());
  }
}

/** A ReadableStream that reads the next chunk only when the consumer asks: backpressure all the way to the source. */
function pullStream(chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): ReadableStream<Uint8Array> {
  const iterator = Symbol.asyncIterator in chunks ? chunks[Symbol.asyncIterator]() : chunks[Symbol.iterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await iterator.next();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    async cancel(reason) {
      await iterator.return?.(reason);
    },
  });
}

/** Body of an `application/octet-stream` upload, gzip-compressed on the fly when asked. */
export function octetStreamBody(data: UploadData, gzip: boolean, sliceBytes: boolean): RequestBody {
  const body = concatBody([toPiece(data)], sliceBytes);
  if (!gzip) return body;
  const source = body.streaming ? (body.body as ReadableStream<Uint8Array>) : new Blob([body.body as Uint8Array | Blob]).stream();
  // What is sent is the compressed stream, not the pieces.
  return { body: source.pipeThrough(new CompressionStream('gzip')), streaming: true };
}

export interface MultipartFile {
  path: string;
  data: UploadData;
}

/**
 * A `multipart/form-data` body with one part per file, each named `file`
 * with the target path as its filename, as envd expects.
 */
export function multipartBody(files: MultipartFile[], boundary: string, sliceBytes: boolean): RequestBody {
  const pieces: Piece[] = [];
  for (const file of files) {
    pieces.push(
      encoder.encode(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${escapeFilename(file.path)}"\r\n` +
          'Content-Type: application/octet-stream\r\n\r\n',
      ),
      toPiece(file.data),
      encoder.encode('\r\n'),
    );
  }
  pieces.push(encoder.encode(`--${boundary}--\r\n`));
  return concatBody(pieces, sliceBytes);
}

/** Escapes a filename the way browsers do in form-data (WHATWG HTML): `"`, CR and LF percent-encoded. */
function escapeFilename(name: string): string {
  return name.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

export function newBoundary(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `----PaddockBoundary${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}
