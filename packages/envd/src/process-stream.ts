// Process.Start and Process.Connect written straight to the HTTP response,
// in either of Connect's formats.
//
// Through connect's generic handler every output chunk was encoded by
// protobuf's writer (a growing buffer, re-copied at each nested message)
// and copied once more into its envelope: envd spent 3.9 to 4.3 ms of CPU
// per MiB of a command's output, five times what a file download costs,
// and 2.3 to 2.9 ms per Start of a short command in JSON, the format the
// official e2b SDK speaks. Here a data event is a header of at most 20
// bytes written next to the output bytes themselves (binary), or the output
// in base64 between the fixed JSON around it (JSON). Every other event is
// encoded by protobuf-es as connect would. Calls with anything unusual
// about them (compression) still go through connect.
import { create, fromBinary, fromJsonString, toBinary, toJsonString, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { encodeEnvelope } from '@connectrpc/connect/protocol';
import { endStreamFlag, endStreamToJson, parseTimeout } from '@connectrpc/connect/protocol-connect';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  ConnectRequestSchema,
  ConnectResponseSchema,
  StartRequestSchema,
  StartResponseSchema,
  type ProcessEvent,
} from '@paddock/models';
import type { EventQueue } from './event-queue.js';
import type { HeaderReader } from './headers.js';
import { outputRun } from './process-manager.js';
import type { ProcessCalls } from './process-service.js';
import { readRequestBody } from './request-body.js';


/** Requests are a few fields; anything near this is not a Start or Connect request. */
const MAX_REQUEST_BYTES = 4 * 1024 * 1024;

// Field numbers of process.proto.
const RESPONSE_EVENT = 1; // StartResponse.event and ConnectResponse.event
const EVENT_DATA = 2; // ProcessEvent.data
const DATA_FIELD = { stdout: 1, stderr: 2, pty: 3 } as const; // ProcessEvent.DataEvent.output

const LENGTH_DELIMITED = 2;

function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size += 1;
  }
  return size;
}

function putVarint(buf: Uint8Array, at: number, n: number): number {
  while (n >= 0x80) {
    buf[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[at++] = n;
  return at;
}

/**
 * The envelope and protobuf framing that come before `size` output bytes of
 * `stream`: together they are the envelope of a StartResponse (or the
 * identical ConnectResponse) holding one data event, byte for byte what
 * protobuf-es and connect would write.
 */
export function dataFrameHeader(stream: keyof typeof DATA_FIELD, size: number): Uint8Array {
  const data = 1 + varintSize(size) + size; // DataEvent
  const event = 1 + varintSize(data) + data; // ProcessEvent
  const message = 1 + varintSize(event) + event; // StartResponse
  const header = new Uint8Array(5 + message - size);
  header[0] = 0; // envelope flags: a message, uncompressed
  new DataView(header.buffer).setUint32(1, message);
  let at = 5;
  header[at++] = (RESPONSE_EVENT << 3) | LENGTH_DELIMITED;
  at = putVarint(header, at, event);
  header[at++] = (EVENT_DATA << 3) | LENGTH_DELIMITED;
  at = putVarint(header, at, data);
  header[at++] = (DATA_FIELD[stream] << 3) | LENGTH_DELIMITED;
  putVarint(header, at, size);
  return header;
}

/** How one of Connect's formats reads the request and frames each event. */
export interface WireFormat {
  contentType: string;
  parse<Desc extends DescMessage>(schema: Desc, bytes: Uint8Array): MessageShape<Desc>;
  /**
   * The parts, written in order, of the frame of one data event whose output
   * is `outputs` one after the other (a run of output that waited for the
   * client, sent as one message).
   */
  dataFrame(stream: keyof typeof DATA_FIELD, outputs: Uint8Array[]): Uint8Array[];
  /** The frame of any other event, as a StartResponse or ConnectResponse. */
  eventFrame(wrap: typeof StartResponseSchema | typeof ConnectResponseSchema, event: ProcessEvent): Uint8Array;
}

/** The mean size of a run's outputs below which the binary frame joins them. */
const MIN_UNJOINED_OUTPUT = 16 * 1024;

function sizeOf(parts: Uint8Array[]): number {
  let size = 0;
  for (const p of parts) size += p.length;
  return size;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export const binaryFormat: WireFormat = {
  contentType: 'application/connect+proto',
  parse: (schema, bytes) => fromBinary(schema, bytes),
  dataFrame: (stream, outputs) => {
    const size = sizeOf(outputs);
    // Large outputs follow their header as they are, with no copy. Small ones
    // (short lines written one by one) are copied together: each write to a
    // chunked response costs more than copying a few bytes.
    const parts = outputs.length > 1 && size < MIN_UNJOINED_OUTPUT * outputs.length ? [Buffer.concat(outputs, size)] : outputs;
    return [dataFrameHeader(stream, size), ...parts];
  },
  eventFrame: (wrap, event) => encodeEnvelope(0, toBinary(wrap, create(wrap, { event }))),
};

export const jsonFormat: WireFormat = {
  contentType: 'application/connect+json',
  // Unknown fields are skipped, as connect's JSON does: a newer client may send some.
  parse: (schema, bytes) => fromJsonString(schema, decoder.decode(bytes), { ignoreUnknownFields: true }),
  dataFrame: (stream, outputs) => [jsonDataFrame(stream, outputs.length === 1 ? outputs[0]! : Buffer.concat(outputs))],
  eventFrame: (wrap, event) => encodeEnvelope(0, encoder.encode(toJsonString(wrap, create(wrap, { event })))),
};

/**
 * The frame of a data event in JSON: the message protobuf-es writes for it,
 * `{"event":{"data":{"stdout":"<base64>"}}}`, byte for byte.
 */
export function jsonDataFrame(stream: keyof typeof DATA_FIELD, output: Uint8Array): Buffer {
  const base64 = Buffer.from(output.buffer, output.byteOffset, output.byteLength).toString('base64');
  const before = `{"event":{"data":{"${stream}":"`;
  const after = '"}}}';
  const length = before.length + base64.length + after.length;
  const frame = Buffer.allocUnsafe(5 + length);
  frame[0] = 0; // envelope flags: a message, uncompressed
  frame.writeUInt32BE(length, 1);
  let at = 5 + frame.write(before, 5, 'latin1');
  at += frame.write(base64, at, 'latin1');
  frame.write(after, at, 'latin1');
  return frame;
}

/** The format of a call for the direct path; undefined sends it to connect. */
export function servesDirectly(req: IncomingMessage): WireFormat | undefined {
  if (req.method !== 'POST') return undefined;
  const encoding = req.headers['connect-content-encoding'];
  if (encoding !== undefined && encoding !== 'identity') return undefined;
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === binaryFormat.contentType) return binaryFormat;
  if (type === jsonFormat.contentType) return jsonFormat;
  return undefined;
}

/** The one message of a server-streaming request body. */
function requestMessage(body: Buffer): Uint8Array {
  if (body.length < 5) throw new ConnectError('protocol error: the request has no message envelope', Code.InvalidArgument);
  const flags = body[0]!;
  const length = body.readUInt32BE(1);
  if (flags !== 0) throw new ConnectError(`protocol error: unexpected envelope flags ${flags} on the request`, Code.InvalidArgument);
  if (body.length !== 5 + length) throw new ConnectError('protocol error: the request envelope does not match the body length', Code.InvalidArgument);
  return body.subarray(5);
}

/** Responses whose writes are held until the end of this turn. */
const held = new WeakSet<ServerResponse>();

/**
 * Holds back what is written to `res` until the end of this turn of the event
 * loop, so that events that come together (a command's last output, its end
 * event and the end of the stream) leave in one write instead of one each.
 * HTTP/2's response (which shares this handler) frames them itself and has
 * no cork.
 */
function holdUntilTurnEnds(res: ServerResponse): void {
  if (!res.cork || held.has(res)) return;
  held.add(res);
  res.cork();
  setImmediate(() => {
    held.delete(res);
    // end() has let everything out already, and the socket may be the next call's.
    if (!res.writableEnded) res.uncork();
  });
}

/** Writes `parts` to the response; resolves when more may be written. */
function write(res: ServerResponse, parts: Uint8Array[]): Promise<void> | undefined {
  holdUntilTurnEnds(res);
  let ok = true;
  for (const p of parts) ok = res.write(p);
  if (ok || res.destroyed) return undefined;
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/**
 * The request's headers as the calls read them: by lower-case name, repeats
 * joined with ", " as Headers joins them. HTTP/2's pseudo-headers (`:path`,
 * ...) are not headers of the call.
 */
function headerReader(req: IncomingMessage): HeaderReader {
  return {
    get(name) {
      const key = name.toLowerCase();
      const value = key.startsWith(':') ? undefined : req.headers[key];
      if (value === undefined) return null;
      return Array.isArray(value) ? value.join(', ') : value;
    },
  };
}

/**
 * Serves a Start or Connect call in `format`. Errors, before or during the
 * stream, end it with Connect's end-of-stream message, as connect does.
 */
export async function serveProcessStream(
  req: IncomingMessage,
  res: ServerResponse,
  method: 'start' | 'connect',
  calls: ProcessCalls,
  authorized: boolean,
  format: WireFormat,
): Promise<void> {
  const header = headerReader(req);
  let queue: EventQueue<ProcessEvent> | undefined;
  // A client that goes away stops its stream; the process keeps running.
  // One gone before the queue exists is seen by the loop below.
  res.once('close', () => queue?.close());
  res.writeHead(200, { 'Content-Type': format.contentType });

  let deadline: NodeJS.Timeout | undefined;
  let failure: ConnectError | undefined;
  try {
    const timeout = parseTimeout(header.get('connect-timeout-ms'), Number.MAX_SAFE_INTEGER);
    if (timeout.error) throw timeout.error;
    const body = await readRequestBody(req, MAX_REQUEST_BYTES, () => new ConnectError(`request is larger than ${MAX_REQUEST_BYTES} bytes`, Code.ResourceExhausted));
    if (!authorized) throw new ConnectError('missing or invalid access token', Code.Unauthenticated);
    const message = requestMessage(body);
    const wrap = method === 'start' ? StartResponseSchema : ConnectResponseSchema;
    if (method === 'start') {
      queue = await calls.start(parse(format, StartRequestSchema, message), header, timeout.timeoutMs);
    } else {
      queue = calls.connect(parse(format, ConnectRequestSchema, message), header);
    }
    const q = queue;
    if (timeout.timeoutMs !== undefined) {
      deadline = setTimeout(() => {
        failure = new ConnectError('the operation timed out', Code.DeadlineExceeded);
        q.close();
      }, timeout.timeoutMs);
    }
    // A run of output that waited goes out as one frame; any other event is a run of its own.
    for await (const run of q.runs()) {
      if (res.destroyed) break;
      const output = outputRun(run);
      const pending = output ? write(res, format.dataFrame(output.stream, output.chunks)) : write(res, run.map((ev) => format.eventFrame(wrap, ev)));
      if (pending) await pending;
    }
  } catch (err) {
    failure = ConnectError.from(err);
  } finally {
    if (deadline) clearTimeout(deadline);
    queue?.close();
  }
  if (res.destroyed) return;
  // A stream that ended well has nothing to say at its end; only an error
  // (whose ConnectError builds a Headers anyway) needs connect's encoder.
  const end = new TextEncoder().encode(failure ? JSON.stringify(endStreamToJson(new Headers(), failure, undefined)) : '{}');
  res.end(encodeEnvelope(endStreamFlag, end));
}

function parse<Desc extends DescMessage>(format: WireFormat, schema: Desc, bytes: Uint8Array): MessageShape<Desc> {
  try {
    return format.parse(schema, bytes);
  } catch (err) {
    throw new ConnectError(`protocol error: the request is not a valid ${schema.typeName}: ${(err as Error).message}`, Code.InvalidArgument);
  }
}
