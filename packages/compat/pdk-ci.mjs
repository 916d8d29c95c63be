import { Sandbox } from '@e2b/code-interpreter';
process.env.E2B_API_URL='http://127.0.0.1:3100'; process.env.E2B_SANDBOX_URL='http://127.0.0.1:3101'; process.env.E2B_API_KEY='e2b_c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00';
let t = performance.now();
const s = await Sandbox.create();
const c = performance.now() - t; t = performance.now();
const e = await s.runCode('1+1');
console.log('create', c.toFixed(1), 'first runCode', (performance.now() - t).toFixed(1), e.text);
const times = [];
for (let i = 0; i < 30; i++) { t = performance.now(); await s.runCode('1+1'); times.push(performance.now() - t); }
times.sort((a,b)=>a-b); console.log('runCode p50', times[15].toFixed(1), 'min', times[0].toFixed(1));
const r = await s.commands.run(`python3 - <<'PY'
import time, json, urllib.request
def once():
    t=time.perf_counter()
    req=urllib.request.Request('http://127.0.0.1:49999/execute', data=json.dumps({"code":"1+1"}).encode(), headers={'content-type':'application/json'})
    with urllib.request.urlopen(req) as r: body=r.read()
    return (time.perf_counter()-t)*1000
xs=sorted(once() for _ in range(30)); print('in-sandbox p50 %.1f min %.1f' % (xs[15], xs[0]))
PY`);
console.log(r.stdout, r.stderr);
await s.kill();
