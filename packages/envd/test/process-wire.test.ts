// Start and Connect as the bytes on the wire show them, in both of Connect's
// formats: what E2B's clients read (the order of events, an uncompressed
// stream, the end-of-stream message) and how requests envd cannot take end.
// The envelopes are read and written here by hand, as the protocol defines
// them: a flags byte, a big-endian length, the message.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { StartRequestSchema, StartResponseSchema } from '@paddock/models';
import { processes, startEnvd, type RunningEnvd } from './harness.js';

let envd: RunningEnvd;
beforeAll(async () => {
  envd = await startEnvd();
});
afterAll(() => envd.stop());

const END_STREAM = 2;

function envelope(message: Uint8Array, flags = 0): Uint8Array {
  const out = new Uint8Array(5 + message.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, message.length);
  out.set(message, 5);
  return out;
}

function envelopes(bytes: Uint8Array): { flags: number; data: Uint8Array }[] {
  const all: { flags: number; data: Uint8Array }[] = [];
  for (let at = 0; at < bytes.length; ) {
    const length = new DataView(bytes.buffer, bytes.byteOffset + at + 1, 4).getUint32(0);
    all.push({ flags: bytes[at]!, data: bytes.subarray(at + 5, at + 5 + length) });
    at += 5 + length;
  }
  return all;
}

const json = (data: Uint8Array): unknown => JSON.parse(new TextDecoder().decode(data));

/** POSTs `body` to Start; gives the status, the headers and the envelopes of the answer. */
async function start(type: 'proto' | 'json', body: Uint8Array, headers: Record<string, string> = {}) {
  const res = await fetch(`${envd.url}/process.Process/Start`, {
    method: 'POST',
    headers: { 'content-type': `application/connect+${type}`, 'x-access-token': envd.token!, ...headers },
    body,
  });
  const frames = envelopes(new Uint8Array(await res.arrayBuffer()));
  const last = frames.at(-1)!;
  expect(last.flags).toBe(END_STREAM);
  return { status: res.status, headers: res.headers, frames, end: json(last.data) as { error?: { code: string; message: string } } };
}

const binaryRequest = (cmd: string, args: string[] = []) => envelope(toBinary(StartRequestSchema, create(StartRequestSchema, { process: { cmd, args }, stdin: false })));
const jsonRequest = (value: unknown) => envelope(new TextEncoder().encode(JSON.stringify(value)));

test('binary: start, output, end, then an empty end-of-stream message', async () => {
  const r = await start('proto', binaryRequest('/bin/sh', ['-c', 'printf hi']));
  expect([r.status, r.headers.get('content-type')]).toEqual([200, 'application/connect+proto']);
  const events = r.frames.slice(0, -1).map((f) => {
    expect(f.flags).toBe(0);
    return fromBinary(StartResponseSchema, f.data).event!.event;
  });
  expect(events[0]!.case).toBe('start');
  expect(events.at(-1)).toMatchObject({ case: 'end', value: { exited: true, exitCode: 0 } });
  const out = events.flatMap((e) => (e.case === 'data' && e.value.output.case === 'stdout' ? [e.value.output.value] : []));
  expect(Buffer.concat(out).toString()).toBe('hi');
  expect(r.end).toEqual({});
});

test('JSON, as the e2b SDK sends it (fields it does not know are skipped): start, output in base64, end, an empty end-of-stream', async () => {
  const r = await start('json', jsonRequest({ process: { cmd: '/bin/sh', args: ['-c', 'printf hi'] }, futureField: 1 }));
  expect([r.status, r.headers.get('content-type')]).toEqual([200, 'application/connect+json']);
  const [first, ...rest] = r.frames.map((f) => ({ flags: f.flags, json: json(f.data) }));
  expect(first).toMatchObject({ flags: 0, json: { event: { start: { pid: expect.any(Number) } } } });
  expect(rest).toContainEqual({ flags: 0, json: { event: { data: { stdout: Buffer.from('hi').toString('base64') } } } });
  expect(rest.at(-2)).toMatchObject({ flags: 0, json: { event: { end: { exited: true, status: 'exit status 0' } } } });
  expect(rest.at(-1)).toEqual({ flags: END_STREAM, json: {} });
});

test('a client that offers compression gets an uncompressed stream: E2B clients refuse compressed frames', async () => {
  // Enough output for a compressing server to compress.
  const r = await start('proto', binaryRequest('/bin/sh', ['-c', 'head -c 300000 /dev/zero']), { 'connect-accept-encoding': 'gzip, br' });
  expect(r.headers.get('connect-content-encoding')).toBeNull();
  expect(r.frames.every((f) => (f.flags & 1) === 0)).toBe(true);
  const bytes = r.frames.slice(0, -1).reduce((n, f) => {
    const ev = fromBinary(StartResponseSchema, f.data).event!.event;
    return n + (ev.case === 'data' ? ev.value.output.value!.length : 0);
  }, 0);
  expect(bytes).toBe(300000);
});

test('a compressed request is refused as unimplemented, naming the encoding', async () => {
  const r = await start('proto', binaryRequest('/bin/true'), { 'connect-content-encoding': 'gzip' });
  expect(r.end.error).toMatchObject({ code: 'unimplemented', message: expect.stringContaining('gzip') });
});

test('a body that is not one whole envelope is invalid_argument', async () => {
  const whole = binaryRequest('/bin/true');
  for (const body of [whole.subarray(0, 3), whole.subarray(0, whole.length - 1)]) {
    const r = await start('proto', body);
    expect(r.status).toBe(200);
    expect(r.end.error).toMatchObject({ code: 'invalid_argument' });
  }
});

test('bytes that are not a StartRequest are invalid_argument, in either format', async () => {
  const named = { code: 'invalid_argument', message: expect.stringContaining('process.StartRequest') };
  expect((await start('proto', envelope(new Uint8Array([0x0a, 0x7f, 0x01])))).end.error).toMatchObject(named);
  for (const body of ['{"process":', '{"process":{"cmd":7}}']) {
    const r = await start('json', envelope(new TextEncoder().encode(body)));
    expect(r.end.error).toMatchObject({ code: 'invalid_argument' });
  }
});

test('a bad timeout header is invalid_argument; a wrong token is unauthenticated', async () => {
  expect((await start('proto', binaryRequest('/bin/true'), { 'connect-timeout-ms': 'soon' })).end.error).toMatchObject({ code: 'invalid_argument' });
  const r = await start('proto', binaryRequest('/bin/true'), { 'x-access-token': 'wrong' });
  expect(r.end.error).toEqual({ code: 'unauthenticated', message: 'missing or invalid access token' });
});

test('a deadline ends the stream with deadline_exceeded after what came before it', async () => {
  const r = await start('json', jsonRequest({ process: { cmd: '/bin/sh', args: ['-c', 'echo early; sleep 30'] } }), { 'connect-timeout-ms': '500' });
  const events = r.frames.slice(0, -1).map((f) => json(f.data));
  expect(events[0]).toMatchObject({ event: { start: {} } });
  expect(events).toContainEqual({ event: { data: { stdout: Buffer.from('early\n').toString('base64') } } });
  expect(r.end.error).toMatchObject({ code: 'deadline_exceeded' });
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
