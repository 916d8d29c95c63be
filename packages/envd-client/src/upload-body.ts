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

/** A request body, made of the caller's data without copying it. */
export interface RequestBody {
  /** When the whole body is in memory: its parts (views of the caller's bytes, or Blobs), sent with their total length. */
  readonly parts: (Uint8Array | Blob)[] | undefined;
  /** The body's chunks in order, each read only when the connection takes the one before; to be read once. */
  chunks(): AsyncIterable<Uint8Array>;
}

function concatBody(pieces: Piece[]): RequestBody {
  const inMemory = !pieces.some(isStreamPiece);
  return { parts: inMemory ? (pieces as (Uint8Array | Blob)[]) : undefined, chunks: () => concatChunks(pieces) };
}

async function* concatChunks(pieces: Piece[]): AsyncGenerator<Uint8Array> {
  for (const piece of pieces) {
    if (ArrayBuffer.isView(piece)) yield piece as Uint8Array;
    else if (isStreamPiece(piece)) yield* piece;
    else yield* readerChunks(piece.stream());
  }
}

/** The byte length of a body that is all in memory. */
export function partsLength(parts: (Uint8Array | Blob)[]): number {
  return parts.reduce((n, p) => n + (ArrayBuffer.isView(p) ? p.byteLength : p.size), 0);
}

/** A ReadableStream that reads the next chunk only when the consumer asks: backpressure all the way to the source. */
export function pullStream(chunks: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array> {
  const iterator = chunks[Symbol.asyncIterator]();
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

/** A body of bytes already made (a JSON request, say). */
export function bytesBody(bytes: Uint8Array): RequestBody {
  return concatBody([bytes]);
}

/** Body of an `application/octet-stream` upload, gzip-compressed on the fly when asked. */
export function octetStreamBody(data: UploadData, gzip: boolean): RequestBody {
  const body = concatBody([toPiece(data)]);
  if (!gzip) return body;
  // What is sent is the compressed stream, whose length nobody knows ahead.
  return { parts: undefined, chunks: () => readerChunks(pullStream(body.chunks()).pipeThrough(new CompressionStream('gzip'))) };
}

export interface MultipartFile {
  path: string;
  data: UploadData;
}

/**
 * A `multipart/form-data` body with one part per file, each named `file`
 * with the target path as its filename, as envd expects.
 */
export function multipartBody(files: MultipartFile[], boundary: string): RequestBody {
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
  return concatBody(pieces);
}

/** Escapes a filename the way browsers do in form-data (WHATWG HTML): `"`, CR and LF percent-encoded. */
function escapeFilename(name: string): string {
  return name.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

export function newBoundary(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `----PaddockBoundary${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}
