// The server's node options reach it however it is started: through the
// `paddock` executable (its `#!` line), `npm start` and `npm run paddock`.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { serverNodeFlags } from '@paddock/server';

const repo = join(import.meta.dirname, '../../..');

describe("the server's node options", () => {
  it('are in the #! line of the paddock executable', () => {
    const first = readFileSync(join(repo, 'packages/cli/src/main.ts'), 'utf8').split('\n')[0];
    expect(first).toBe(`#!/usr/bin/env -S node ${serverNodeFlags.join(' ')}`);
    // tsc keeps the line, so the built file starts with it too.
    expect(readFileSync(join(repo, 'packages/cli/dist/main.js'), 'utf8').split('\n')[0]).toBe(first);
  });

  it('are on the command line of npm start and npm run paddock', () => {
    const scripts = (JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts.start).toContain(`node ${serverNodeFlags.join(' ')} packages/cli/dist/main.js start`);
    expect(scripts.paddock).toBe(`tools/node/run.sh node ${serverNodeFlags.join(' ')} packages/cli/dist/main.js`);
  });
});
