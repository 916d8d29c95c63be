// The contract tooling guards the wire: buf rejects a renumbered field, and
// the generated-code check rejects hand edits. Both run the real tools.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const repoRoot = resolve(import.meta.dirname, '../../..');
const buf = join(repoRoot, 'node_modules/.bin/buf');

function run(cmd: string, args: string[]) {
  const res = spawnSync(cmd, args, { cwd: repoRoot, encoding: 'utf8', timeout: 120_000 });
  if (res.error) throw res.error;
  return { status: res.status, output: `${res.stdout}${res.stderr}` };
}

let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), 'paddock-contracts-'));
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

function copyModule(): string {
  const dir = join(scratch, 'module');
  cpSync(join(repoRoot, 'proto'), join(dir, 'proto'), { recursive: true });
  cpSync(join(repoRoot, 'buf.yaml'), join(dir, 'buf.yaml'));
  return dir;
}

describe('buf', () => {
  test('lint is clean', () => {
    const res = run(buf, ['lint']);
    expect(res.output).toBe('');
    expect(res.status).toBe(0);
  });

  test('breaking passes for an unchanged copy', () => {
    const res = run(buf, ['breaking', copyModule(), '--against', repoRoot]);
    expect(res.output).toBe('');
    expect(res.status).toBe(0);
  });

  test('breaking fails when a field number changes', () => {
    const dir = copyModule();
    const file = join(dir, 'proto/filesystem/filesystem.proto');
    const original = readFileSync(file, 'utf8');
    const edited = original.replace('  string path = 3;\n  // Size in bytes', '  string path = 12;\n  // Size in bytes');
    expect(edited).not.toBe(original);
    writeFileSync(file, edited);
    const res = run(buf, ['breaking', dir, '--against', repoRoot]);
    expect(res.status).not.toBe(0);
    expect(res.output).toMatch(/EntryInfo/);
    expect(res.output).toMatch(/field "3" with name "path" on message "EntryInfo" was deleted/);
  });
});

describe('generated code check', () => {
  const check = (genDir: string) => run(process.execPath, [join(repoRoot, 'tools/check-generated.mjs'), '--gen-dir', genDir]);

  test('passes on the committed generated code', () => {
    const res = check(join(repoRoot, 'packages/models/src/gen'));
    expect(res.output).toContain('generated code is up to date');
    expect(res.status).toBe(0);
  });

  test('fails and prints the diff when a generated file was edited by hand', () => {
    const copy = join(scratch, 'gen');
    cpSync(join(repoRoot, 'packages/models/src/gen'), copy, { recursive: true });
    const file = join(copy, 'process/process_pb.ts');
    writeFileSync(file, readFileSync(file, 'utf8').replace('uint32 pid = 2;', 'uint32 pid = 2; // hand edit'));
    const res = check(copy);
    expect(res.status).toBe(1);
    expect(res.output).toContain('hand edit');
    expect(res.output).toContain('process_pb.ts');
  });
});
