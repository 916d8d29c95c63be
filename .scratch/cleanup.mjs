import { RuncRuntime } from '@paddock/runtime';
import { existsSync, readdirSync, rmSync, mkdirSync } from 'node:fs';
const dirs = process.argv.slice(2);
for (const home of dirs) {
  const dataDir = `${home}/runtime`;
  const existed = existsSync(home);
  mkdirSync(dataDir, { recursive: true });
  const rt = new RuncRuntime({ dataDir });
  try { await rt.removeEverything(); console.log(home, 'left:', await rt.leftovers()); } catch (e) { console.log(home, 'failed', e.message); }
  rmSync(home, { recursive: true, force: true });
}
