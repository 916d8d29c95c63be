// What the steps of template builds reach: the operator's rules
// (PADDOCK_BUILD_ALLOW_OUT, PADDOCK_BUILD_DENY_OUT) bind every build
// container, while sandboxes keep their own. Against a fake internet this
// test builds (tools/testing/fake-internet.mjs).
import { randomBytes } from 'node:crypto';
import { startFakeInternet, type FakeInternet } from '../../../tools/testing/fake-internet.mjs';
import { api as callApi, finishedBuild, run, testServer, type TestServer } from './harness.js';

if (process.getuid?.() !== 0) throw new Error('the build network test makes namespaces, veths and nftables tables: run it as root');

const A = '198.51.100.171';
const B = '198.51.100.172';
const DNS = '198.51.100.173';

let inet: FakeInternet;
let t: TestServer;

beforeAll(async () => {
  inet = await startFakeInternet({ prefix: `bt${randomBytes(3).toString('hex').slice(0, 5)}`, transit: '198.51.100.164', hosts: [A, B], dns: DNS, names: { 'pkgs.example': A, 'other.example': B } });
  t = await testServer({ uplink: inet.uplink, dns: [DNS], buildAllowOut: ['pkgs.example'], buildDenyOut: ['0.0.0.0/0'] });
}, 120_000);

afterAll(async () => {
  try {
    await t?.teardown();
  } finally {
    await inet?.stop();
  }
});

async function build(name: string, cmd: string) {
  const req = await callApi(t.server, 'POST', '/v3/templates', { name });
  await callApi(t.server, 'POST', `/v2/templates/${req.body.templateID}/builds/${req.body.buildID}`, { fromTemplate: 'base', steps: [{ type: 'RUN', args: [cmd, 'root'] }] });
  return finishedBuild(t.server, req.body.templateID, req.body.buildID);
}

test("a build step reaches what the operator's build rules allow, and nothing else; sandboxes keep their own rules", async () => {
  const allowed = await build('net-allowed', 'curl -sS --max-time 5 http://pkgs.example/ > /opt/got');
  expect([allowed.status, allowed.reason]).toEqual(['ready', undefined]);
  const denied = await build('net-denied', 'curl -sS --max-time 5 http://other.example/ > /opt/got');
  expect(denied.status).toBe('error');
  expect(denied.reason!.logEntries.map((e) => e.message).join('\n')).toContain('Could not resolve host: other.example');
  // Port 80 goes through the egress proxy (the rules name a domain), which refuses an address the rules deny with a 403.
  const byAddress = await build('net-denied-address', `curl -fsS --max-time 5 http://${B}/ > /opt/got`);
  expect(byAddress.status).toBe('error');
  expect(byAddress.reason!.logEntries.map((e) => e.message).join('\n')).toContain('The requested URL returned error: 403');

  const s = await t.control.createSandbox({ templateID: 'net-allowed' });
  const r = await run(t.server, s.sandboxID, s.envdAccessToken, `cat /opt/got; echo; curl -sS --max-time 5 http://other.example/`);
  expect(r.stdout).toBe(`http ${A} host=pkgs.example\nhttp ${B} host=other.example`);
  await t.control.killSandbox(s.sandboxID);
});
