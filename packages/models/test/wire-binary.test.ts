// Pins the protobuf binary encoding of a few messages byte for byte, so that
// a renumbered field or a changed type shows up here as well as in buf.
import { create, equals, fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  EntryInfoSchema,
  FileType,
  ProcessEventSchema,
  ProcessSelectorSchema,
  SendSignalRequestSchema,
  Signal,
  StartRequestSchema,
  WatchDirResponseSchema,
  EventType,
} from '../src/index.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('binary encoding', () => {
  test('EndEvent exit code is sint32 (zigzag) in field 3 of ProcessEvent', () => {
    const ev = create(ProcessEventSchema, { event: { case: 'end', value: { exitCode: -1 } } });
    expect(hex(toBinary(ProcessEventSchema, ev))).toBe('1a020801');
  });

  test('Signal enum values are the Linux signal numbers', () => {
    const req = create(SendSignalRequestSchema, { signal: Signal.SIGKILL });
    expect(hex(toBinary(SendSignalRequestSchema, req))).toBe('1009');
    expect(Signal.SIGTERM).toBe(15);
  });

  test('ProcessSelector tag is field 2', () => {
    const sel = create(ProcessSelectorSchema, { selector: { case: 'tag', value: 'a' } });
    expect(hex(toBinary(ProcessSelectorSchema, sel))).toBe('120161');
  });

  test('an explicitly empty optional symlink_target (field 10) is encoded', () => {
    const entry = create(EntryInfoSchema, { symlinkTarget: '' });
    expect(hex(toBinary(EntryInfoSchema, entry))).toBe('5200');
  });

  test('stdin=false survives a binary round trip', () => {
    const req = create(StartRequestSchema, { process: { cmd: 'cat' }, stdin: false });
    const back = fromBinary(StartRequestSchema, toBinary(StartRequestSchema, req));
    expect(back.stdin).toBe(false);
    expect(equals(StartRequestSchema, req, back)).toBe(true);
  });

  test('messages round trip through binary', () => {
    const entry = create(EntryInfoSchema, {
      name: 'x',
      type: FileType.DIRECTORY,
      path: '/x',
      size: 4096n,
      mode: 0o40755,
      metadata: { a: 'b' },
    });
    expect(equals(EntryInfoSchema, fromBinary(EntryInfoSchema, toBinary(EntryInfoSchema, entry)), entry)).toBe(true);
    const watch = create(WatchDirResponseSchema, {
      event: { case: 'filesystem', value: { name: 'f', type: EventType.RENAME, entry } },
    });
    expect(equals(WatchDirResponseSchema, fromBinary(WatchDirResponseSchema, toBinary(WatchDirResponseSchema, watch)), watch)).toBe(true);
  });
});
