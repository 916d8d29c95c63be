// Pins the Connect JSON mapping of envd's messages: clients in other
// languages and the official e2b SDK read and write exactly these shapes.
import { create, fromJson, toJson, type DescMessage, type JsonValue, type MessageShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  CreateWatcherResponseSchema,
  EntryInfoSchema,
  EventType,
  FileType,
  ListDirRequestSchema,
  ProcessEventSchema,
  SendSignalRequestSchema,
  Signal,
  StartRequestSchema,
  StartResponseSchema,
  StreamInputRequestSchema,
  UpdateRequestSchema,
  WatchDirResponseSchema,
} from '../src/index.js';

function roundTrip<Desc extends DescMessage>(schema: Desc, msg: MessageShape<Desc>, json: JsonValue): void {
  expect(toJson(schema, msg)).toEqual(json);
  expect(toJson(schema, fromJson(schema, json))).toEqual(json);
}

describe('Connect JSON mapping', () => {
  test('EntryInfo uses camelCase names, enum names, int64 as string and RFC 3339 time', () => {
    const entry = create(EntryInfoSchema, {
      name: 'a.txt',
      type: FileType.FILE,
      path: '/home/user/a.txt',
      size: 10n,
      mode: 0o644,
      permissions: '-rw-r--r--',
      owner: 'user',
      group: 'user',
      modifiedTime: timestampFromDate(new Date('2024-01-02T03:04:05Z')),
      metadata: { origin: 'upload' },
    });
    roundTrip(EntryInfoSchema, entry, {
      name: 'a.txt',
      type: 'FILE_TYPE_FILE',
      path: '/home/user/a.txt',
      size: '10',
      mode: 420,
      permissions: '-rw-r--r--',
      owner: 'user',
      group: 'user',
      modifiedTime: '2024-01-02T03:04:05Z',
      metadata: { origin: 'upload' },
    });
  });

  test('an optional symlinkTarget appears only when set', () => {
    const link = create(EntryInfoSchema, { name: 'l', type: FileType.SYMLINK, symlinkTarget: '/etc/hosts' });
    expect(toJson(EntryInfoSchema, link)).toEqual({ name: 'l', type: 'FILE_TYPE_SYMLINK', symlinkTarget: '/etc/hosts' });
    expect(toJson(EntryInfoSchema, create(EntryInfoSchema, { name: 'f' }))).toEqual({ name: 'f' });
  });

  test('process output is base64 inside the data oneof', () => {
    const res = create(StartResponseSchema, {
      event: { event: { case: 'data', value: { output: { case: 'stdout', value: new TextEncoder().encode('hi\n') } } } },
    });
    roundTrip(StartResponseSchema, res, { event: { data: { stdout: 'aGkK' } } });
  });

  test('ProcessEvent start, end and keepalive shapes', () => {
    roundTrip(ProcessEventSchema, create(ProcessEventSchema, { event: { case: 'start', value: { pid: 42 } } }), {
      start: { pid: 42 },
    });
    roundTrip(
      ProcessEventSchema,
      create(ProcessEventSchema, {
        event: { case: 'end', value: { exitCode: -1, exited: false, status: 'signal: killed', error: 'gone' } },
      }),
      { end: { exitCode: -1, status: 'signal: killed', error: 'gone' } },
    );
    roundTrip(ProcessEventSchema, create(ProcessEventSchema, { event: { case: 'end', value: { exitCode: 3, exited: true, status: 'exit status 3' } } }), {
      end: { exitCode: 3, exited: true, status: 'exit status 3' },
    });
    roundTrip(ProcessEventSchema, create(ProcessEventSchema, { event: { case: 'keepalive', value: {} } }), {
      keepalive: {},
    });
  });

  test('WatchDirResponse start, filesystem and keepalive shapes', () => {
    roundTrip(WatchDirResponseSchema, create(WatchDirResponseSchema, { event: { case: 'start', value: {} } }), { start: {} });
    roundTrip(
      WatchDirResponseSchema,
      create(WatchDirResponseSchema, {
        event: { case: 'filesystem', value: { name: 'dir/a.txt', type: EventType.WRITE } },
      }),
      { filesystem: { name: 'dir/a.txt', type: 'EVENT_TYPE_WRITE' } },
    );
    roundTrip(WatchDirResponseSchema, create(WatchDirResponseSchema, { event: { case: 'keepalive', value: {} } }), {
      keepalive: {},
    });
  });

  test('StartRequest keeps an explicit stdin=false (optional field presence)', () => {
    const req = create(StartRequestSchema, {
      process: { cmd: '/bin/bash', args: ['-l', '-c', 'echo hi'], envs: { A: '1' }, cwd: '/tmp' },
      tag: 'job',
      stdin: false,
    });
    roundTrip(StartRequestSchema, req, {
      process: { cmd: '/bin/bash', args: ['-l', '-c', 'echo hi'], envs: { A: '1' }, cwd: '/tmp' },
      tag: 'job',
      stdin: false,
    });
    expect(fromJson(StartRequestSchema, { process: { cmd: 'ls' } }).stdin).toBeUndefined();
  });

  test('PTY size, process selector and signals', () => {
    roundTrip(
      UpdateRequestSchema,
      create(UpdateRequestSchema, { process: { selector: { case: 'pid', value: 7 } }, pty: { size: { cols: 80, rows: 24 } } }),
      { process: { pid: 7 }, pty: { size: { cols: 80, rows: 24 } } },
    );
    roundTrip(
      SendSignalRequestSchema,
      create(SendSignalRequestSchema, { process: { selector: { case: 'tag', value: 'job' } }, signal: Signal.SIGKILL }),
      { process: { tag: 'job' }, signal: 'SIGNAL_SIGKILL' },
    );
  });

  test('StreamInput start and data events', () => {
    roundTrip(
      StreamInputRequestSchema,
      create(StreamInputRequestSchema, { event: { case: 'start', value: { process: { selector: { case: 'pid', value: 12 } } } } }),
      { start: { process: { pid: 12 } } },
    );
    roundTrip(
      StreamInputRequestSchema,
      create(StreamInputRequestSchema, {
        event: { case: 'data', value: { input: { input: { case: 'pty', value: new Uint8Array([4]) } } } },
      }),
      { data: { input: { pty: 'BA==' } } },
    );
  });

  test('proto field names are accepted on input, camelCase is written', () => {
    const res = fromJson(CreateWatcherResponseSchema, { watcher_id: 'w1' });
    expect(toJson(CreateWatcherResponseSchema, res)).toEqual({ watcherId: 'w1' });
    expect(toJson(ListDirRequestSchema, create(ListDirRequestSchema, { path: '/', depth: 2 }))).toEqual({ path: '/', depth: 2 });
  });

  test('unknown fields are rejected by default and ignored when asked', () => {
    expect(() => fromJson(ListDirRequestSchema, { path: '/', future: 1 })).toThrow(/future/);
    expect(fromJson(ListDirRequestSchema, { path: '/', future: 1 }, { ignoreUnknownFields: true }).path).toBe('/');
  });
});
