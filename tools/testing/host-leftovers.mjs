#!/usr/bin/env node
// What a test run leaves on the host that it must not: sandbox cgroups,
// mounts, loop devices, network namespaces, nftables tables, network
// interfaces. CI records the host before the tests and compares after them;
// anything new is a leak, named, and the step fails.
//
//   node tools/testing/host-leftovers.mjs record FILE
//   node tools/testing/host-leftovers.mjs compare FILE
//
// The one cgroup every runtime on the host shares, `/paddock` (it carries the
// sandboxes' CPU weight), is left by design; what is below it is each data
// directory's and each sandbox's, and must go with them.
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const CGROUPS = '/sys/fs/cgroup';

/** Directories below `dir`, depth-first (cgroupfs gives no entry types, so each is looked at). */
function subdirs(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (lstatSync(p).isDirectory()) out.push(p, ...subdirs(p));
  }
  return out;
}

function cgroups() {
  if (!existsSync(CGROUPS)) return [];
  const hierarchies = existsSync(join(CGROUPS, 'cgroup.controllers'))
    ? [CGROUPS]
    : readdirSync(CGROUPS)
        .map((d) => join(CGROUPS, d))
        .filter((d) => !lstatSync(d).isSymbolicLink() && existsSync(join(d, 'cgroup.procs')));
  return hierarchies.flatMap((h) => (existsSync(join(h, 'paddock')) ? subdirs(join(h, 'paddock')) : []));
}

/** Mount points, but /run/netns itself: `ip netns` mounts it the first time a namespace is made, and it stays (the namespaces are counted on their own). */
function mounts() {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' ')[4])
    .filter((mp) => mp !== '/run/netns');
}

function loopDevices() {
  if (!existsSync('/sys/block')) return [];
  return readdirSync('/sys/block')
    .filter((n) => n.startsWith('loop') && existsSync(join('/sys/block', n, 'loop/backing_file')))
    .map((n) => `/dev/${n} on ${readFileSync(join('/sys/block', n, 'loop/backing_file'), 'utf8').trim()}`);
}

function netns() {
  return existsSync('/run/netns') ? readdirSync('/run/netns') : [];
}

/** The output of a command as lines; none when the command is missing. */
function lines(cmd, args) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      .split('\n')
      .filter(Boolean);
  } catch {
    return [];
  }
}

function snapshot() {
  return {
    cgroup: cgroups(),
    mount: mounts(),
    'loop device': loopDevices(),
    'network namespace': netns(),
    'nftables table': lines('nft', ['list', 'tables']),
    // `ip -o link` lines start with the index; the name follows.
    'network interface': lines('ip', ['-o', 'link', 'show']).map((l) => l.split(':')[1].trim().split('@')[0]),
  };
}

const [mode, file] = process.argv.slice(2);
if (mode === 'record' && file) {
  writeFileSync(file, JSON.stringify(snapshot()));
} else if (mode === 'compare' && file) {
  const before = JSON.parse(readFileSync(file, 'utf8'));
  const now = snapshot();
  const left = Object.entries(now).flatMap(([kind, items]) => items.filter((i) => !(before[kind] ?? []).includes(i)).map((i) => `${kind} ${i}`));
  if (left.length) {
    console.error(`the tests left ${left.length} thing(s) on the host:\n${left.map((l) => `  ${l}`).join('\n')}`);
    process.exit(1);
  }
  console.log('nothing left on the host');
} else {
  console.error('usage: host-leftovers.mjs record FILE | compare FILE');
  process.exit(2);
}
