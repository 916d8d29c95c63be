// The official e2b SDK against a Paddock served over TLS, configured as for
// a real domain: `https://api.{domain}` and `https://{port}-{id}.{domain}`,
// one wildcard certificate from a test CA that Node trusts through
// NODE_EXTRA_CA_CERTS. `*.localhost` names resolve to loopback here
// (libnss-myhostname, which .ci/run installs). The certificate is then
// renewed in place and reloaded while the server runs.
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { connect, type PeerCertificate } from 'node:tls';
import { freePort } from '../../../tools/testing/ports.mjs';
import { API_KEY, startForE2b, type CompatServer } from './harness.js';

const DOMAIN = 'paddock.localhost';
const work = mkdtempSync(join(tmpdir(), 'paddock-tls-'));
const e2b = pathToFileURL(join(import.meta.dirname, '../../../node_modules/e2b/dist/index.mjs')).href;

/** A certificate for the domain and its subdomains, signed by the test CA, as `name`.pem / `name`.key. */
function issue(name: string): void {
  const at = (f: string) => join(work, f);
  writeFileSync(at(`${name}.ext`), `subjectAltName=DNS:${DOMAIN},DNS:*.${DOMAIN}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`);
  execFileSync('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${DOMAIN}`, '-keyout', at(`${name}.key`), '-out', at(`${name}.csr`)], { stdio: 'ignore' });
  execFileSync('openssl', ['x509', '-req', '-in', at(`${name}.csr`), '-CA', at('ca.pem'), '-CAkey', at('ca.key'), '-CAcreateserial', '-days', '2', '-out', at(`${name}.pem`), '-extfile', at(`${name}.ext`)], {
    stdio: 'ignore',
  });
}

/** The certificate the server presents at `port` to a client asking for `host`. */
function served(port: number, host: string): Promise<PeerCertificate> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, servername: host, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerCertificate());
      socket.end();
    });
    socket.on('error', reject);
  });
}

let c: CompatServer;
let proxyPort: number;
beforeAll(async () => {
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=paddock test CA', '-keyout', join(work, 'ca.key'), '-out', join(work, 'ca.pem')], { stdio: 'ignore' });
  issue('first');
  issue('second');
  copyFileSync(join(work, 'first.pem'), join(work, 'cert.pem'));
  copyFileSync(join(work, 'first.key'), join(work, 'key.pem'));
  proxyPort = await freePort();
  c = await startForE2b({ tlsCert: join(work, 'cert.pem'), tlsKey: join(work, 'key.pem'), domain: `${DOMAIN}:${proxyPort}`, proxyPort });
});
afterAll(async () => {
  await c?.teardown();
  rmSync(work, { recursive: true, force: true });
});

/** Runs an e2b program in its own Node (not blocking this one, which serves it), configured only by the environment a user would set. */
function e2bProgram(body: string, env: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const file = join(work, 'program.mjs');
  writeFileSync(file, `import { Sandbox } from '${e2b}';\n${body}\n`);
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('E2B_') && k !== 'NODE_EXTRA_CA_CERTS'));
  const apiPort = new URL(c.server.apiUrl).port;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [file],
      { env: { ...base, E2B_API_URL: `https://api.${DOMAIN}:${apiPort}`, E2B_DOMAIN: `${DOMAIN}:${proxyPort}`, E2B_API_KEY: API_KEY, ...env }, encoding: 'utf8', timeout: 120_000 },
      (err, stdout, stderr) => resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const PROGRAM = `
const sbx = await Sandbox.create('base');
const run = await sbx.commands.run('echo "over $((6 * 7)) bits"');
await sbx.files.write('tls.txt', 'sealed');
const read = await sbx.files.read('tls.txt');
console.log(JSON.stringify({ url: sbx.getHost(49983), stdout: run.stdout, read }));
await sbx.kill();
`;

test('the official SDK works unchanged over TLS with the CA trusted, and refuses the server without it', async () => {
  const ok = await e2bProgram(PROGRAM, { NODE_EXTRA_CA_CERTS: join(work, 'ca.pem') });
  expect(ok.stderr).toBe('');
  expect(ok.status).toBe(0);
  const got = JSON.parse(ok.stdout.trim().split('\n').at(-1)!) as { url: string; stdout: string; read: string };
  expect(got).toMatchObject({ stdout: 'over 42 bits\n', read: 'sealed' });
  expect(got.url).toMatch(new RegExp(`^49983-[a-z0-9]+\\.${DOMAIN.replace('.', '\\.')}:${proxyPort}$`));

  const untrusted = await e2bProgram(PROGRAM, {});
  expect(untrusted.status).not.toBe(0);
  expect(untrusted.stderr).toMatch(/unable to verify the first certificate|self-signed certificate|unable to get local issuer certificate/);
});

test('a renewed certificate is served after reloadTls; files that are no pair are refused and the served one kept', async () => {
  const apiPort = Number(new URL(c.server.apiUrl).port);
  const first = await served(apiPort, `api.${DOMAIN}`);
  expect((await served(proxyPort, `49983-x.${DOMAIN}`)).fingerprint256).toBe(first.fingerprint256);

  copyFileSync(join(work, 'second.pem'), join(work, 'cert.pem'));
  copyFileSync(join(work, 'second.key'), join(work, 'key.pem'));
  c.server.reloadTls();
  const second = await served(apiPort, `api.${DOMAIN}`);
  expect(second.fingerprint256).not.toBe(first.fingerprint256);
  expect((await served(proxyPort, `49983-x.${DOMAIN}`)).fingerprint256).toBe(second.fingerprint256);

  // A key that is not the certificate's: refused by name, the second still served.
  copyFileSync(join(work, 'first.key'), join(work, 'key.pem'));
  expect(() => c.server.reloadTls()).toThrow(/do not make a pair/);
  expect((await served(apiPort, `api.${DOMAIN}`)).fingerprint256).toBe(second.fingerprint256);
});
