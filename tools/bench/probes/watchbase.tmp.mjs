// temp probe: watch latency vs a local HTTP write → fs.watch → streamed event, alternated
import { Sandbox } from '@paddock/sdk';
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import { watch, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serverInHome } from '../server-process.mjs';

if (process.argv[2] === '--serve') {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-bench-wb-'));
  const listeners = new Set();
  watch(dir, (_t, name) => { for (const l of listeners) l.write(`${name}\n`); });
  const srv = createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/events') { res.writeHead(200, { 'content-type': 'text/plain' }); res.flushHeaders(); listeners.add(res); req.on('close', () => listeners.delete(res)); return; }
    let body = ''; req.on('data', (d) => (body += d)); req.on('end', () => { writeFileSync(join(dir, url.searchParams.get('name')), body); res.end('ok'); });
  });
  srv.listen(0, '127.0.0.1', () => process.send(srv.address().port));
  process.on('disconnect', () => { rmSync(dir, { recursive: true, force: true }); process.exit(0); });
} else {
  const child = fork(new URL(import.meta.url).pathname, ['--serve'], { execArgv: ['--initial-old-space-size=64'] });
  const port = await new Promise((r) => child.once('message', r));
  const base = `http://127.0.0.1:${port}`;
  const ev = await fetch(`${base}/events`);
  const reader = ev.body.pipeThrough(new TextDecoderStream()).getReader();
  let want = null, buf = '';
  (async () => { for (;;) { const { value, done } = await reader.read(); if (done) return; buf += value; let i; while ((i = buf.indexOf('\n')) >= 0) { const n = buf.slice(0, i); buf = buf.slice(i + 1); if (want && n === want.name) want.resolve(); } } })();
  let k = 0;
  const local = async () => { const name = `l${k++}`; const seen = new Promise((resolve) => (want = { name, resolve })); const t = performance.now(); await (await fetch(`${base}/write?name=${name}`, { method: 'POST', body: 'x' })).text(); await seen; return performance.now() - t; };
  const KEY = 'e2b_' + 'd'.repeat(40);
  const { server, close } = await serverInHome('paddock-bench-probe-', { warmPoolSize: 0, initialApiKey: KEY, metricsIntervalMs: 60_000 });
  const sbx = await Sandbox.create({ apiUrl: server.apiUrl, apiKey: KEY, sandboxUrl: server.proxyUrl, timeoutMs: 3600_000 });
  await sbx.commands.run('mkdir -p watched');
  let waiting; let w = 0;
  const handle = await sbx.files.watchDir('watched', (e) => { if (waiting && e.name === waiting.name && e.type === 'write') waiting.resolve(); }, { timeoutMs: 0 });
  const remote = async () => { const name = `w${w++}`; const seen = new Promise((resolve) => (waiting = { name, resolve })); const t = performance.now(); await sbx.files.write(`watched/${name}`, 'x'); await seen; return performance.now() - t; };
  const med = (a) => { const s = [...a].sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
  const blocks = [];
  for (let b = 0; b < Number(process.argv[2] ?? 24); b++) {
    // disturb: some CPU work or idle
    if (b % 3 === 0) await new Promise((r) => setTimeout(r, 2000));
    else if (b % 3 === 1) { await sbx.commands.run('head -c 200M /dev/zero > /dev/null'); }
    else { const t = Date.now(); while (Date.now() - t < 500); }
    await remote(); await local();
    const R = [], L = [], Q = [];
    for (let i = 0; i < 16; i++) { const a = i % 2 ? await local() : await remote(); const c = i % 2 ? await remote() : await local(); const r = i % 2 ? c : a; const l = i % 2 ? a : c; R.push(r); L.push(l); Q.push(r / l); }
    blocks.push({ r: med(R), l: med(L), q: med(Q) });
    console.log(`block ${b}: watch ${med(R).toFixed(2)} local ${med(L).toFixed(3)} ratio ${med(Q).toFixed(2)}`);
  }
  const sd = (a) => { const l = a.map(Math.log); const m = l.reduce((x, y) => x + y) / l.length; return Math.sqrt(l.reduce((x, y) => x + (y - m) ** 2, 0) / (l.length - 1)); };
  console.log('sd log of block medians: watch', sd(blocks.map((b) => b.r)).toFixed(3), 'local', sd(blocks.map((b) => b.l)).toFixed(3), 'ratio', sd(blocks.map((b) => b.q)).toFixed(3));
  await handle.stop(); await sbx.kill(); await close(); reader.cancel().catch(() => {}); child.disconnect();
}
