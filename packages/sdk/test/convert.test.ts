// The boundary between wire types and the SDK's own: each direction, field by field.
import { create } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { ListedSandbox, SandboxDetail, SandboxMetric } from '@paddock/control-client';
import {
  EntryInfoSchema,
  EventType,
  FileType as WireFileType,
  ProcessInfoSchema,
  StartRequestSchema,
  StartResponseSchema,
  WatchDirResponseSchema,
} from '@paddock/models';
import {
  toConnectionInfo,
  toEntryInfo,
  toEntryInfos,
  toNetworkUpdate,
  toNewSandbox,
  toProcessInfo,
  toProcessMessage,
  toSandboxInfo,
  toSandboxMetrics,
  toStartRequest,
  toWatchMessage,
  toWriteInfo,
} from '../src/convert.js';

describe('control API', () => {
  test('create body: seconds rounded up, only what was given, lifecycle as autoPause/autoResume', () => {
    expect(toNewSandbox({ template: 'base', timeoutMs: 300_000, secure: true })).toEqual({ templateID: 'base', timeout: 300, secure: true });
    expect(
      toNewSandbox({
        template: 'py',
        timeoutMs: 1_001,
        secure: false,
        metadata: { app: 'x' },
        envs: { A: '1' },
        allowInternetAccess: false,
        network: { allowOut: ['1.1.1.1'], denyOut: ['0.0.0.0/0'], egressProxy: { address: 'p:1080', username: 'u' } },
        lifecycle: { onTimeout: { action: 'pause', keepMemory: false }, autoResume: true },
      }),
    ).toEqual({
      templateID: 'py',
      timeout: 2,
      secure: false,
      metadata: { app: 'x' },
      envVars: { A: '1' },
      allow_internet_access: false,
      network: { allowOut: ['1.1.1.1'], denyOut: ['0.0.0.0/0'], egressProxy: { address: 'p:1080', username: 'u' } },
      autoPause: true,
      autoPauseMemory: false,
      autoResume: { enabled: true },
    });
    expect(toNewSandbox({ template: 'b', timeoutMs: 0, secure: true, lifecycle: { onTimeout: 'kill' } })).toMatchObject({ autoPause: false });
  });

  test('network update uses the wire names', () => {
    expect(toNetworkUpdate({ allowOut: ['example.com'], allowInternetAccess: false })).toEqual({
      allowOut: ['example.com'],
      allow_internet_access: false,
    });
    expect(toNetworkUpdate({})).toEqual({});
  });

  test('connection record: empty tokens and a null domain become undefined', () => {
    expect(
      toConnectionInfo({ sandboxID: 's1', templateID: 't', clientID: 'c', envdVersion: '0.7.0', envdAccessToken: 'tok', domain: null }),
    ).toEqual({ sandboxId: 's1', envdVersion: '0.7.0', envdAccessToken: 'tok', trafficAccessToken: undefined, sandboxDomain: undefined });
  });

  test('sandbox details: dates, name from alias, lifecycle, network without the proxy password', () => {
    const detail: SandboxDetail = {
      sandboxID: 's1',
      templateID: 'tpl',
      clientID: 'c',
      alias: 'base',
      startedAt: '2025-01-02T03:04:05Z',
      endAt: '2025-01-02T03:09:05Z',
      envdVersion: '0.7.0',
      cpuCount: 2,
      memoryMB: 512,
      diskSizeMB: 1024,
      state: 'running',
      metadata: { k: 'v' },
      allowInternetAccess: null,
      domain: 'localhost:3001',
      lifecycle: { onTimeout: 'pause', autoResume: false },
      network: { allowOut: ['a.com'], egressProxy: { address: 'p:1', username: 'u', password: 'pw' } },
    };
    expect(toSandboxInfo(detail)).toEqual({
      sandboxId: 's1',
      templateId: 'tpl',
      name: 'base',
      metadata: { k: 'v' },
      startedAt: new Date('2025-01-02T03:04:05Z'),
      endAt: new Date('2025-01-02T03:09:05Z'),
      state: 'running',
      cpuCount: 2,
      memoryMB: 512,
      envdVersion: '0.7.0',
      network: { allowOut: ['a.com'], egressProxy: { address: 'p:1', username: 'u' } },
      lifecycle: { onTimeout: 'pause', autoResume: false },
      sandboxDomain: 'localhost:3001',
      volumeMounts: [],
    });
  });

  test('a listed sandbox has no detail-only fields', () => {
    const listed: ListedSandbox = {
      sandboxID: 's2',
      templateID: 'tpl',
      clientID: 'c',
      startedAt: '2025-01-02T03:04:05Z',
      endAt: '2025-01-02T03:09:05Z',
      envdVersion: '0.7.0',
      cpuCount: 1,
      memoryMB: 256,
      diskSizeMB: 0,
      state: 'paused',
      volumeMounts: [{ name: 'vol', path: '/data' }],
    };
    const info = toSandboxInfo(listed);
    expect(info).toMatchObject({ sandboxId: 's2', state: 'paused', metadata: {}, volumeMounts: [{ name: 'vol', path: '/data' }] });
    expect(Object.keys(info)).not.toEqual(expect.arrayContaining(['network', 'lifecycle', 'name']));
  });

  test('metrics: the unix timestamp when present, the ISO one otherwise', () => {
    const metric: SandboxMetric = {
      timestamp: '2025-01-01T00:00:00Z',
      timestampUnix: 1_700_000_000,
      cpuCount: 2,
      cpuUsedPct: 12.5,
      memUsed: 1,
      memTotal: 2,
      memCache: 3,
      diskUsed: 4,
      diskTotal: 5,
    };
    expect(toSandboxMetrics(metric)).toEqual({
      timestamp: new Date(1_700_000_000_000),
      cpuUsedPct: 12.5,
      cpuCount: 2,
      memUsed: 1,
      memTotal: 2,
      memCache: 3,
      diskUsed: 4,
      diskTotal: 5,
    });
    const older = { ...metric } as Partial<SandboxMetric>;
    delete older.timestampUnix;
    expect(toSandboxMetrics(older as SandboxMetric).timestamp).toEqual(new Date('2025-01-01T00:00:00Z'));
  });
});

describe('envd', () => {
  const wireEntry = create(EntryInfoSchema, {
    name: 'a.txt',
    type: WireFileType.FILE,
    path: '/home/user/a.txt',
    size: 12n,
    mode: 0o100644,
    permissions: '-rw-r--r--',
    owner: 'user',
    group: 'user',
    modifiedTime: timestampFromMs(1_700_000_000_123),
    metadata: { k: 'v' },
  });

  test('entries: sizes as numbers, times as Dates, kinds as names, empty metadata left out', () => {
    expect(toEntryInfo(wireEntry)).toEqual({
      name: 'a.txt',
      type: 'file',
      path: '/home/user/a.txt',
      size: 12,
      mode: 0o100644,
      permissions: '-rw-r--r--',
      owner: 'user',
      group: 'user',
      modifiedTime: new Date(1_700_000_000_123),
      metadata: { k: 'v' },
    });
    const link = create(EntryInfoSchema, { name: 'l', type: WireFileType.SYMLINK, symlinkTarget: '/x' });
    expect(toEntryInfo(link)).toMatchObject({ type: 'symlink', symlinkTarget: '/x' });
    expect(toEntryInfo(link)).not.toHaveProperty('metadata');
    const unknown = create(EntryInfoSchema, { name: '?', type: WireFileType.UNSPECIFIED });
    expect(toEntryInfos([wireEntry, unknown, create(EntryInfoSchema, { name: 'd', type: WireFileType.DIRECTORY })]).map((e) => e.type)).toEqual([
      'file',
      'dir',
    ]);
  });

  test('written files', () => {
    expect(toWriteInfo({ name: 'a', path: '/a', type: 'file' })).toEqual({ name: 'a', path: '/a', type: 'file' });
    expect(toWriteInfo({ name: 'a', path: '/a', type: 'file', metadata: {} })).not.toHaveProperty('metadata');
  });

  test('watch messages', () => {
    expect(toWatchMessage(create(WatchDirResponseSchema, { event: { case: 'start', value: {} } }))).toEqual({ kind: 'start' });
    expect(
      toWatchMessage(
        create(WatchDirResponseSchema, { event: { case: 'filesystem', value: { name: 'x', type: EventType.RENAME, entry: wireEntry } } }),
      ),
    ).toEqual({ kind: 'event', event: { name: 'x', type: 'rename', entry: toEntryInfo(wireEntry) } });
    expect(
      toWatchMessage(create(WatchDirResponseSchema, { event: { case: 'filesystem', value: { name: 'x', type: EventType.UNSPECIFIED } } })),
    ).toEqual({ kind: 'other' });
    expect(toWatchMessage(create(WatchDirResponseSchema, { event: { case: 'keepalive', value: {} } }))).toEqual({ kind: 'other' });
  });

  test('process start request: stdin only when given, pty size', () => {
    expect(create(StartRequestSchema, toStartRequest({ cmd: '/bin/bash', args: ['-l', '-c', 'ls'], stdin: false }))).toMatchObject({
      process: { cmd: '/bin/bash', args: ['-l', '-c', 'ls'], envs: {} },
      stdin: false,
    });
    const pty = create(StartRequestSchema, toStartRequest({ cmd: '/bin/bash', args: ['-i', '-l'], pty: { cols: 80, rows: 24 } }));
    expect(pty.stdin).toBeUndefined();
    expect(pty.pty?.size).toMatchObject({ cols: 80, rows: 24 });
  });

  test('process messages and process info', () => {
    const msg = (event: Parameters<typeof create<typeof StartResponseSchema>>[1]) => toProcessMessage(create(StartResponseSchema, event));
    expect(msg({ event: { event: { case: 'start', value: { pid: 7 } } } })).toEqual({ kind: 'start', pid: 7 });
    const data = new Uint8Array([104, 105]);
    expect(msg({ event: { event: { case: 'data', value: { output: { case: 'stderr', value: data } } } } })).toEqual({ kind: 'stderr', data });
    expect(msg({ event: { event: { case: 'end', value: { exitCode: 2, exited: true, status: 'exit status 2', error: '' } } } })).toEqual({
      kind: 'end',
      exitCode: 2,
      error: undefined,
    });
    expect(msg({ event: { event: { case: 'keepalive', value: {} } } })).toEqual({ kind: 'other' });
    expect(
      toProcessInfo(create(ProcessInfoSchema, { pid: 3, tag: 't', config: { cmd: '/bin/bash', args: ['-c', 'x'], envs: { A: '1' }, cwd: '/tmp' } })),
    ).toEqual({ pid: 3, tag: 't', cmd: '/bin/bash', args: ['-c', 'x'], envs: { A: '1' }, cwd: '/tmp' });
  });
});
