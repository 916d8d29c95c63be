// The proxy's kept tunnels to a sandbox's own ports, against a real
// sandbox: a service sees one connection for several requests, one that
// closes its connections gets a new one each time, and a pause lets go of
// what was kept (after the resume a new connection serves). The relay's own
// cases (both paths, the limit, a drop while a request is under way) are in
// relay.test.ts.
import { envd, eventually, testServer, type TestServer } from './harness.js';

let t: TestServer;
let sandbox: { sandboxID: string; envdAccessToken?: string | null | undefined };

// Each answer is the number of the connection it came on, as the service counts them.
const SERVICE = [
  "const http=require('http'),net=require('net');let n=0,m=0;",
  "const s=http.createServer((q,r)=>{q.socket.n??=++n;if(q.url==='/close')r.setHeader('connection','close');r.end(String(q.socket.n));});",
  "s.keepAliveTimeout=60000;s.listen(8000,'127.0.0.1');",
  // An HTTP/1.0 service: one answer, then the connection ends.
  "net.createServer((c)=>{const k=String(++m);c.once('data',()=>c.end('HTTP/1.0 200 OK\\r\\ncontent-length: '+k.length+'\\r\\n\\r\\n'+k));}).listen(8001,'127.0.0.1');",
].join('');

beforeAll(async () => {
  t = await testServer();
  sandbox = await t.control.createSandbox({ templateID: 'base' });
  void (async () => {
    try {
      for await (const _ of envd(t.server, sandbox.sandboxID, sandbox.envdAccessToken ?? undefined).proc.start({ process: { cmd: 'node', args: ['-e', SERVICE] }, stdin: false })) {
        // the service runs while the stream is open
      }
    } catch {
      // ended with the sandbox
    }
  })();
  await eventually(async () => (await call(8000, '/')).status === 200, 'the service in the sandbox');
});
afterAll(() => t.teardown());

async function call(port: number, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${t.server.proxyUrl}${path}`, { headers: { 'E2b-Sandbox-Id': sandbox.sandboxID, 'E2b-Sandbox-Port': String(port) } });
  return { status: res.status, body: await res.text() };
}

/** The connection numbers that answered `count` requests one after another. */
async function connections(port: number, path: string, count: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const r = await call(port, path);
    expect(r.status).toBe(200);
    out.push(r.body);
  }
  return out;
}

test('requests one after another to a port share one connection into the sandbox', async () => {
  const seen = await connections(8000, '/', 5);
  expect(new Set(seen).size).toBe(1);
});

test('a service that closes its connections (Connection: close, HTTP/1.0) gets a new one for each request', async () => {
  const closing = await connections(8000, '/close', 3);
  expect(new Set(closing).size).toBe(3);
  const old = await connections(8001, '/', 3);
  expect(new Set(old).size).toBe(3);
  // The kept connection to 8000 was used up by the first /close; the next request opens one and keeps it.
  const after = await connections(8000, '/', 2);
  expect(new Set(after).size).toBe(1);
  expect(closing).not.toContain(after[0]);
});

test("a pause lets go of the sandbox's kept connections: after the resume a new one serves", async () => {
  const [before] = await connections(8000, '/', 2);
  await t.control.pauseSandbox(sandbox.sandboxID);
  expect((await call(8000, '/')).status).toBe(502);
  await t.control.connectSandbox(sandbox.sandboxID, { timeout: 300 });
  const after = await connections(8000, '/', 2);
  expect(after[0]).not.toBe(before);
  expect(new Set(after).size).toBe(1);
});

test('after a kill the port answers 502, naming the sandbox', async () => {
  expect((await call(8000, '/')).status).toBe(200);
  await t.control.killSandbox(sandbox.sandboxID);
  const gone = await call(8000, '/');
  expect(gone.status).toBe(502);
  expect(JSON.parse(gone.body)).toMatchObject({ sandboxId: sandbox.sandboxID });
});
