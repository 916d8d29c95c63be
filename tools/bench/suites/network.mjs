// Sandbox networks (`--only network`), against a fake internet the suite
// builds (tools/testing/fake-internet.mjs; nothing leaves the machine), as a
// user of the official e2b SDK sees them:
//   - create + first command on a server whose sandboxes have networks,
//     against one whose sandboxes have loopback only;
//   - a download from a fake internet host inside a sandbox (through its
//     veth, nftables and NAT), against the same download by the host;
//   - Sandbox.updateNetwork (one nftables transaction and the cut of denied
//     connections), against getInfo, the API round trip without it;
//   - HTTP requests each on a new connection to a host allowed by domain
//     (through the egress proxy), against the same host allowed by address.
import { Sandbox } from 'e2b';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { startFakeInternet } from '../../testing/fake-internet.mjs';
import { closings, MiB, pair, row, summarize } from '../lib.mjs';
import { serverInHome } from '../processes.mjs';

const KEY = 'e2b_' + 'c'.repeat(40);
const A = '203.0.113.91';
const DNS = '203.0.113.92';
const SIZE = 256 * MiB;

/** Requests from inside a sandbox, each on a new connection: ms per request, timed in there. */
const PER_CONNECTION = (url, n) =>
  `node -e "const http=require('http');let i=0;const t=process.hrtime.bigint();const next=()=>{if(i++===${n}){console.log(Number(process.hrtime.bigint()-t)/1e6/${n});return}http.get('${url}',{agent:false},(r)=>{r.resume();r.on('end',next)}).on('error',(e)=>{console.error(e.message);process.exit(1)})};next()"`;

export async function networkSuite({ quick, log }) {
  const closing = closings();
  try {
    const inet = await startFakeInternet({ prefix: `bn${randomBytes(2).toString('hex')}`, transit: '203.0.113.84', hosts: [A], dns: DNS, names: { 'files.example': A } });
    closing.add(inet.stop);
    const common = { warmPoolSize: 0, initialApiKey: KEY, metricsIntervalMs: 60_000 };
    const withNet = await serverInHome('paddock-bench-net-', { ...common, uplink: inet.uplink, dns: [DNS] });
    closing.add(withNet.close);
    const without = await serverInHome('paddock-bench-nonet-', { ...common, network: false });
    closing.add(without.close);
    const opts = (s) => ({ apiUrl: s.apiUrl, sandboxUrl: s.proxyUrl, apiKey: KEY });

    log('network: create + first command, with a network and without');
    const createAndRun = (s) => async () => {
      const t = performance.now();
      const sbx = await Sandbox.create('base', opts(s));
      await sbx.commands.run('true');
      const ms = performance.now() - t;
      await sbx.kill();
      return { ms };
    };
    const [created, createdBare] = await pair([createAndRun(withNet), createAndRun(without)], { warmup: 1, iterations: quick ? 4 : 20 });

    const sbx = await Sandbox.create('base', { ...opts(withNet), timeoutMs: 600_000 });
    closing.add(() => sbx.kill());
    log(`network: downloads of ${SIZE / MiB} MiB from a fake internet host, in a sandbox and on the host`);
    const url = `http://${A}/bytes/${SIZE}`;
    const inSandbox = async () => {
      const r = await sbx.commands.run(`curl -sS -o /dev/null -w '%{size_download} %{time_total}' ${url}`);
      const [bytes, seconds] = r.stdout.trim().split(' ').map(Number);
      return { ms: seconds * 1000, bytes };
    };
    const onHost = async () => {
      const [bytes, seconds] = execFileSync('curl', ['-sS', '-o', '/dev/null', '-w', '%{size_download} %{time_total}', url], { encoding: 'utf8' }).trim().split(' ').map(Number);
      return { ms: seconds * 1000, bytes };
    };
    const [download, downloadHost] = await pair([inSandbox, onHost], { warmup: 1, iterations: quick ? 3 : 10, rate: true });

    log('network: updateNetwork against getInfo');
    let flip = 0;
    const update = async () => {
      const t = performance.now();
      await sbx.updateNetwork(flip++ % 2 ? { denyOut: ['198.51.100.0/24'] } : { denyOut: ['198.51.100.0/25'] });
      return { ms: performance.now() - t };
    };
    const info = async () => {
      const t = performance.now();
      await sbx.getInfo();
      return { ms: performance.now() - t };
    };
    const [updated, infoMs] = await pair([update, info], { warmup: 2, iterations: quick ? 10 : 40 });

    log('network: a new connection per HTTP request, allowed by domain (the egress proxy) and by address');
    const n = quick ? 50 : 200;
    const perRequest = (rules, target) => {
      const samples = [];
      return {
        samples,
        run: async () => {
          await sbx.updateNetwork(rules);
          const r = await sbx.commands.run(PER_CONNECTION(target, n));
          samples.push(Number(r.stdout.trim()));
        },
      };
    };
    const proxied = perRequest({ allowOut: ['files.example'], denyOut: ['0.0.0.0/0'] }, 'http://files.example/');
    const direct = perRequest({ allowOut: [A], denyOut: ['0.0.0.0/0'] }, `http://${A}/`);
    for (let i = 0; i < (quick ? 3 : 9); i++) for (const p of i % 2 ? [direct, proxied] : [proxied, direct]) await p.run();

    return [
      row({ suite: 'network', name: "Sandbox.create + commands.run('true'), cold, with its network", unit: 'ms', value: created, baseline: createdBare, baselineName: 'the same on a server whose sandboxes have loopback only' }),
      row({ suite: 'network', name: `download of ${SIZE / MiB} MiB from a fake internet host, in a sandbox`, unit: 'MiB/s', value: download, baseline: downloadHost, baselineName: 'the same download by the host', target: { on: 'ratio', op: '>=', value: 0.9 } }),
      row({ suite: 'network', name: 'Sandbox.updateNetwork (rules in force, denied connections cut)', unit: 'ms', value: updated, baseline: infoMs, baselineName: 'Sandbox.getInfo, the API round trip alone' }),
      row({ suite: 'network', name: 'HTTP request on a new connection, to a host allowed by domain (egress proxy)', unit: 'ms', value: summarize(proxied.samples), baseline: summarize(direct.samples), baselineName: 'the same host allowed by address (no proxy)' }),
    ];
  } finally {
    await closing.run();
  }
}
