// envd's own writer of Start and Connect streams (process-stream.ts), in
// both of Connect's formats: its data frames are byte for byte what
// protobuf-es and connect write, and requests it cannot take end as connect
// ends them.
import { create, toBinary, toJsonString } from '@bufbuild/protobuf';
import { Code } from '@connectrpc/connect';
import { encodeEnvelope } from '@connectrpc/connect/protocol';
import { endStreamFromJson } from '@connectrpc/connect/protocol-connect';
import { ConnectResponseSchema, StartRequestSchema, StartResponseSchema } from '@paddock/models';
import { binaryFormat, dataFrameHeader, jsonDataFrame, jsonFormat } from '../src/process-stream.js';
import { processes, startEnvd, type RunningEnvd } from './harness.js';

describe('data frames', () => {
  // Sizes around every length whose varint grows by a byte, at each level of nesting.
  const sizes = [0, 1, 116, 117, 118, 127, 128, 129, 16_376, 16_377, 16_383, 16_384, 65_536, 2_097_140, 2_097_152, 3_000_000];
  for (const stream of ['stdout', 'stderr', 'pty'] as const) {
    test(`a ${stream} frame equals the envelope of the message protobuf-es encodes, for every length`, () => {
      for (const size of sizes) {
        const bytes = new Uint8Array(size).map((_, i) => i % 251);
        const event = { event: { case: 'data' as const, value: { output: { case: stream, value: bytes } } } };
        const expected = encodeEnvelope(0, toBinary(StartResponseSchema, create(StartResponseSchema, { event })));
        const ours = Buffer.concat([dataFrameHeader(stream, size), bytes]);
        expect(Buffer.compare(ours, expected)).toBe(0);
        // Connect's response has the same shape: one frame serves both calls.
        expect(Buffer.compare(ours, encodeEnvelope(0, toBinary(ConnectResponseSchema, create(ConnectResponseSchema, { event }))))).toBe(0);
      }
    });
  }
});

describe('JSON data frames', () => {
  const sizes = [0, 1, 2, 3, 4, 57, 1000, 65_536, 3_000_000];
  for (const stream of ['stdout', 'stderr', 'pty'] as const) {
    test(`a ${stream} frame equals the envelope of the JSON protobuf-es writes, for every length`, () => {
      for (const size of sizes) {
        const bytes = new Uint8Array(size).map((_, i) => (i * 7) % 256);
        const event = { event: { case: 'data' as const, value: { output: { case: stream, value: bytes } } } };
        const json = (text: string) => encodeEnvelope(0, new TextEncoder().encode(text));
        expect(Buffer.compare(jsonDataFrame(stream, bytes), json(toJsonString(StartResponseSchema, create(StartResponseSchema, { event }))))).toBe(0);
        expect(Buffer.compare(jsonDataFrame(stream, bytes), json(toJsonString(ConnectResponseSchema, create(ConnectResponseSchema, { event }))))).toBe(0);
      }
    });
  }

  test('a view into a larger buffer encodes only its own bytes', () => {
    const whole = new Uint8Array([1, 2, 3, 4, 5, 6]);
    const event = { event: { case: 'data' as const, value: { output: { case: 'stdout' as const, value: whole.subarray(2, 5) } } } };
    const expected = encodeEnvelope(0, new TextEncoder().encode(toJsonString(StartResponseSchema, create(StartResponseSchema, { event }))));
    expect(Buffer.compare(jsonDataFrame('stdout', whole.subarray(2, 5)), expected)).toBe(0);
  });
});

describe('frames of a run of output', () => {
  // Output that waited for the client leaves as one message of all its parts.
  const parts = [new Uint8Array([1, 2, 3]), new Uint8Array(70_000).fill(9), new Uint8Array(0), new Uint8Array([250, 251])];
  const whole = Buffer.concat(parts);
  for (const format of [binaryFormat, jsonFormat]) {
    test(`in ${format.contentType}, the parts make the frame of their joined output`, () => {
      const ours = Buffer.concat(format.dataFrame('stderr', parts));
      expect(Buffer.compare(ours, Buffer.concat(format.dataFrame('stderr', [whole])))).toBe(0);
      const event = { event: { case: 'data' as const, value: { output: { case: 'stderr' as const, value: whole } } } };
      const message = create(StartResponseSchema, { event });
      const expected =
        format === binaryFormat ? encodeEnvelope(0, toBinary(StartResponseSchema, message)) : encodeEnvelope(0, new TextEncoder().encode(toJsonString(StartResponseSchema, message)));
      expect(Buffer.compare(ours, expected)).toBe(0);
    });
  }

  test('binary frames send large parts themselves, not a copy', () => {
    const large = [new Uint8Array(65_536).fill(1), new Uint8Array(40_000).fill(2)];
    const frame = binaryFormat.dataFrame('stdout', large);
    expect(frame).toHaveLength(large.length + 1);
    large.forEach((p, i) => expect(frame[i + 1]).toBe(p));
  });

  test('binary frames copy many small parts into one (short lines written one by one)', () => {
    const lines = Array.from({ length: 5000 }, (_, i) => new TextEncoder().encode(`line ${i}\n`));
    const frame = binaryFormat.dataFrame('stdout', lines);
    expect(frame).toHaveLength(2);
    expect(Buffer.compare(Buffer.concat(frame), Buffer.concat(binaryFormat.dataFrame('stdout', [Buffer.concat(lines)])))).toBe(0);
  });
});

describe('requests', () => {
  let envd: RunningEnvd;
  beforeAll(async () => {
    envd = await startEnvd();
  });
  afterAll(() => envd.stop());

  const request = (cmd: string) => encodeEnvelope(0, toBinary(StartRequestSchema, create(StartRequestSchema, { process: { cmd, args: [] }, stdin: false })));

  /** POSTs `body` to Start in the binary format; returns the status and the end-of-stream message. */
  async function start(body: Uint8Array, headers: Record<string, string> = {}) {
    const res = await fetch(`${envd.url}/process.Process/Start`, {
      method: 'POST',
      headers: { 'content-type': 'application/connect+proto', 'x-access-token': envd.token!, ...headers },
      body,
    });
    const bytes = new Uint8Array(await res.arrayBuffer());
    // The last envelope is the end of the stream.
    let at = 0;
    let last = { flags: -1, data: new Uint8Array() };
    while (at < bytes.length) {
      const length = new DataView(bytes.buffer, at + 1, 4).getUint32(0);
      last = { flags: bytes[at]!, data: bytes.subarray(at + 5, at + 5 + length) };
      at += 5 + length;
    }
    return { status: res.status, type: res.headers.get('content-type'), flags: last.flags, end: endStreamFromJson(last.data) };
  }

  test('a command runs and the stream ends with an empty end-of-stream message', async () => {
    const r = await start(request('/bin/true'));
    expect(r).toMatchObject({ status: 200, type: 'application/connect+proto', flags: 2 });
    expect(r.end.error).toBeUndefined();
  });

  test('a body that is not one envelope is invalid_argument, named', async () => {
    const whole = request('/bin/true');
    for (const body of [whole.subarray(0, 3), whole.subarray(0, whole.length - 1), new Uint8Array([1, ...whole.subarray(1)])]) {
      const r = await start(body);
      expect(r.status).toBe(200);
      expect(r.end.error).toMatchObject({ code: Code.InvalidArgument, rawMessage: expect.stringMatching(/^protocol error: /) });
    }
  });

  test('bytes that are not a StartRequest are invalid_argument', async () => {
    const r = await start(encodeEnvelope(0, new Uint8Array([0x0a, 0x7f, 0x01])));
    expect(r.end.error).toMatchObject({ code: Code.InvalidArgument, rawMessage: expect.stringContaining('process.StartRequest') });
  });

  test('a bad timeout header is invalid_argument; a wrong token is unauthenticated', async () => {
    expect((await start(request('/bin/true'), { 'connect-timeout-ms': 'soon' })).end.error).toMatchObject({ code: Code.InvalidArgument });
    const r = await start(request('/bin/true'), { 'x-access-token': 'wrong' });
    expect(r.end.error).toMatchObject({ code: Code.Unauthenticated, rawMessage: 'missing or invalid access token' });
  });

  test('a compressed request is left to connect, which refuses the encoding', async () => {
    const r = await start(request('/bin/true'), { 'connect-content-encoding': 'gzip' });
    expect(r.end.error).toMatchObject({ code: Code.Unimplemented });
  });

  test('a client that goes away leaves the process running, found again by Connect', async () => {
    const client = processes(envd, { binary: true });
    const abort = new AbortController();
    const it = client.start({ process: { cmd: '/bin/sh', args: ['-c', 'sleep 0.3; echo done'] }, stdin: false }, { signal: abort.signal })[Symbol.asyncIterator]();
    const first = (await it.next()).value!.event!.event;
    const pid = first.case === 'start' ? first.value.pid : 0;
    abort.abort();
    let out = '';
    for await (const r of client.connect({ process: { selector: { case: 'pid', value: pid } } })) {
      const ev = r.event!.event;
      if (ev.case === 'data' && ev.value.output.case === 'stdout') out += Buffer.from(ev.value.output.value).toString();
    }
    expect(out).toBe('done\n');
  });

  /** POSTs `body` to Start in JSON; returns the status, content type, the data and the end-of-stream message. */
  async function startJson(body: string, headers: Record<string, string> = {}) {
    const res = await fetch(`${envd.url}/process.Process/Start`, {
      method: 'POST',
      headers: { 'content-type': 'application/connect+json', 'x-access-token': envd.token!, ...headers },
      body: encodeEnvelope(0, new TextEncoder().encode(body)),
    });
    const bytes = new Uint8Array(await res.arrayBuffer());
    const messages: { flags: number; json: unknown }[] = [];
    for (let at = 0; at < bytes.length; ) {
      const length = new DataView(bytes.buffer, at + 1, 4).getUint32(0);
      messages.push({ flags: bytes[at]!, json: JSON.parse(new TextDecoder().decode(bytes.subarray(at + 5, at + 5 + length))) });
      at += 5 + length;
    }
    return { status: res.status, type: res.headers.get('content-type'), messages };
  }

  test('in JSON, as the e2b SDK sends it: start, output in base64, end, an empty end-of-stream', async () => {
    const r = await startJson(JSON.stringify({ process: { cmd: '/bin/sh', args: ['-c', 'printf hi'] }, futureField: 1 }));
    expect(r.status).toBe(200);
    expect(r.type).toBe('application/connect+json');
    const [start, ...rest] = r.messages;
    expect(start).toMatchObject({ flags: 0, json: { event: { start: { pid: expect.any(Number) } } } });
    expect(rest).toContainEqual({ flags: 0, json: { event: { data: { stdout: Buffer.from('hi').toString('base64') } } } });
    expect(rest.at(-2)).toMatchObject({ flags: 0, json: { event: { end: { exited: true, status: 'exit status 0' } } } });
    expect(rest.at(-1)).toEqual({ flags: 2, json: {} });
  });

  test('in JSON, a body that is not a StartRequest is invalid_argument', async () => {
    for (const body of ['{"process":', '{"process":{"cmd":7}}']) {
      const r = await startJson(body);
      expect(r.messages.at(-1)).toMatchObject({ flags: 2, json: { error: { code: 'invalid_argument', message: expect.stringContaining('process.StartRequest') } } });
    }
  });
});
