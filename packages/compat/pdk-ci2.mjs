import { Sandbox } from '@e2b/code-interpreter';
import { request, Agent } from 'undici';
process.env.E2B_API_URL='http://127.0.0.1:3100'; process.env.E2B_SANDBOX_URL='http://127.0.0.1:3101'; process.env.E2B_API_KEY='e2b_c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00';
const s = await Sandbox.create();
await s.runCode('1+1');
const med = (xs) => xs.sort((a,b)=>a-b)[Math.floor(xs.length/2)].toFixed(1);
async function measure(name, fn) { const xs=[]; for (let i=0;i<40;i++){const t=performance.now(); await fn(); xs.push(performance.now()-t);} console.log(name, med(xs)); }
const headers = { 'content-type': 'application/json', 'e2b-sandbox-id': s.sandboxId, 'e2b-sandbox-port': '49999', 'x-access-token': s.envdAccessToken ?? '' };
const agent = new Agent({ keepAliveTimeout: 10000 });
for (let round = 0; round < 2; round++) {
await measure('sdk runCode', () => s.runCode('1+1'));
await measure('undici via proxy', async () => { const r = await request('http://127.0.0.1:3101/execute', { method: 'POST', headers, body: JSON.stringify({ code: '1+1' }), dispatcher: agent }); await r.body.text(); });
await measure('fetch via proxy', async () => { const r = await fetch('http://127.0.0.1:3101/execute', { method: 'POST', headers, body: JSON.stringify({ code: '1+1' }) }); await r.text(); });
await measure('undici via proxy GET /health', async () => { const r = await request('http://127.0.0.1:3101/health', { headers, dispatcher: agent }); await r.body.text(); });
}
await s.kill();
