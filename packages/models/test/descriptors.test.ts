// Checks every service, RPC, message, field (name, number, type, label,
// oneof) and enum value of envd's protos against the listing E2B's clients
// are built from. A difference here breaks wire compatibility.
import { ScalarType, type DescEnum, type DescField, type DescFile, type DescMessage } from '@bufbuild/protobuf';
import { file_filesystem_filesystem, file_process_process } from '../src/index.js';

type Listing = Record<string, string[]>;

const expectedMessages: Listing = {
  'filesystem.MoveRequest': ['source=1 string', 'destination=2 string'],
  'filesystem.MoveResponse': ['entry=1 filesystem.EntryInfo'],
  'filesystem.MakeDirRequest': ['path=1 string'],
  'filesystem.MakeDirResponse': ['entry=1 filesystem.EntryInfo'],
  'filesystem.RemoveRequest': ['path=1 string'],
  'filesystem.RemoveResponse': [],
  'filesystem.StatRequest': ['path=1 string'],
  'filesystem.StatResponse': ['entry=1 filesystem.EntryInfo'],
  'filesystem.EntryInfo': [
    'name=1 string',
    'type=2 filesystem.FileType',
    'path=3 string',
    'size=4 int64',
    'mode=5 uint32',
    'permissions=6 string',
    'owner=7 string',
    'group=8 string',
    'modified_time=9 google.protobuf.Timestamp',
    'symlink_target=10 optional string',
    'metadata=11 map<string,string>',
  ],
  'filesystem.ListDirRequest': ['path=1 string', 'depth=2 uint32'],
  'filesystem.ListDirResponse': ['entries=1 repeated filesystem.EntryInfo'],
  'filesystem.WatchDirRequest': ['path=1 string', 'recursive=2 bool', 'include_entry=3 bool', 'allow_network_mounts=4 bool'],
  'filesystem.FilesystemEvent': ['name=1 string', 'type=2 filesystem.EventType', 'entry=3 optional filesystem.EntryInfo'],
  'filesystem.WatchDirResponse': [
    'start=1 filesystem.WatchDirResponse.StartEvent oneof event',
    'filesystem=2 filesystem.FilesystemEvent oneof event',
    'keepalive=3 filesystem.WatchDirResponse.KeepAlive oneof event',
  ],
  'filesystem.WatchDirResponse.StartEvent': [],
  'filesystem.WatchDirResponse.KeepAlive': [],
  'filesystem.CreateWatcherRequest': ['path=1 string', 'recursive=2 bool', 'include_entry=3 bool', 'allow_network_mounts=4 bool'],
  'filesystem.CreateWatcherResponse': ['watcher_id=1 string'],
  'filesystem.GetWatcherEventsRequest': ['watcher_id=1 string'],
  'filesystem.GetWatcherEventsResponse': ['events=1 repeated filesystem.FilesystemEvent'],
  'filesystem.RemoveWatcherRequest': ['watcher_id=1 string'],
  'filesystem.RemoveWatcherResponse': [],

  'process.PTY': ['size=1 process.PTY.Size'],
  'process.PTY.Size': ['cols=1 uint32', 'rows=2 uint32'],
  'process.ProcessConfig': ['cmd=1 string', 'args=2 repeated string', 'envs=3 map<string,string>', 'cwd=4 optional string'],
  'process.ListRequest': [],
  'process.ProcessInfo': ['config=1 process.ProcessConfig', 'pid=2 uint32', 'tag=3 optional string'],
  'process.ListResponse': ['processes=1 repeated process.ProcessInfo'],
  'process.StartRequest': ['process=1 process.ProcessConfig', 'pty=2 optional process.PTY', 'tag=3 optional string', 'stdin=4 optional bool'],
  'process.UpdateRequest': ['process=1 process.ProcessSelector', 'pty=2 optional process.PTY'],
  'process.UpdateResponse': [],
  'process.ProcessEvent': [
    'start=1 process.ProcessEvent.StartEvent oneof event',
    'data=2 process.ProcessEvent.DataEvent oneof event',
    'end=3 process.ProcessEvent.EndEvent oneof event',
    'keepalive=4 process.ProcessEvent.KeepAlive oneof event',
  ],
  'process.ProcessEvent.StartEvent': ['pid=1 uint32'],
  'process.ProcessEvent.DataEvent': ['stdout=1 bytes oneof output', 'stderr=2 bytes oneof output', 'pty=3 bytes oneof output'],
  'process.ProcessEvent.EndEvent': ['exit_code=1 sint32', 'exited=2 bool', 'status=3 string', 'error=4 optional string'],
  'process.ProcessEvent.KeepAlive': [],
  'process.StartResponse': ['event=1 process.ProcessEvent'],
  'process.ConnectResponse': ['event=1 process.ProcessEvent'],
  'process.SendInputRequest': ['process=1 process.ProcessSelector', 'input=2 process.ProcessInput'],
  'process.SendInputResponse': [],
  'process.ProcessInput': ['stdin=1 bytes oneof input', 'pty=2 bytes oneof input'],
  'process.StreamInputRequest': [
    'start=1 process.StreamInputRequest.StartEvent oneof event',
    'data=2 process.StreamInputRequest.DataEvent oneof event',
    'keepalive=3 process.StreamInputRequest.KeepAlive oneof event',
  ],
  'process.StreamInputRequest.StartEvent': ['process=1 process.ProcessSelector'],
  'process.StreamInputRequest.DataEvent': ['input=2 process.ProcessInput'],
  'process.StreamInputRequest.KeepAlive': [],
  'process.StreamInputResponse': [],
  'process.SendSignalRequest': ['process=1 process.ProcessSelector', 'signal=2 process.Signal'],
  'process.SendSignalResponse': [],
  'process.CloseStdinRequest': ['process=1 process.ProcessSelector'],
  'process.CloseStdinResponse': [],
  'process.ConnectRequest': ['process=1 process.ProcessSelector'],
  'process.ProcessSelector': ['pid=1 uint32 oneof selector', 'tag=2 string oneof selector'],
};

const expectedEnums: Listing = {
  'filesystem.FileType': ['FILE_TYPE_UNSPECIFIED=0', 'FILE_TYPE_FILE=1', 'FILE_TYPE_DIRECTORY=2', 'FILE_TYPE_SYMLINK=3'],
  'filesystem.EventType': [
    'EVENT_TYPE_UNSPECIFIED=0',
    'EVENT_TYPE_CREATE=1',
    'EVENT_TYPE_WRITE=2',
    'EVENT_TYPE_REMOVE=3',
    'EVENT_TYPE_RENAME=4',
    'EVENT_TYPE_CHMOD=5',
  ],
  'process.Signal': ['SIGNAL_UNSPECIFIED=0', 'SIGNAL_SIGTERM=15', 'SIGNAL_SIGKILL=9'],
};

const expectedServices: Listing = {
  'filesystem.Filesystem': [
    'Stat(filesystem.StatRequest) returns (filesystem.StatResponse)',
    'MakeDir(filesystem.MakeDirRequest) returns (filesystem.MakeDirResponse)',
    'Move(filesystem.MoveRequest) returns (filesystem.MoveResponse)',
    'ListDir(filesystem.ListDirRequest) returns (filesystem.ListDirResponse)',
    'Remove(filesystem.RemoveRequest) returns (filesystem.RemoveResponse)',
    'WatchDir(filesystem.WatchDirRequest) returns (stream filesystem.WatchDirResponse)',
    'CreateWatcher(filesystem.CreateWatcherRequest) returns (filesystem.CreateWatcherResponse)',
    'GetWatcherEvents(filesystem.GetWatcherEventsRequest) returns (filesystem.GetWatcherEventsResponse)',
    'RemoveWatcher(filesystem.RemoveWatcherRequest) returns (filesystem.RemoveWatcherResponse)',
  ],
  'process.Process': [
    'List(process.ListRequest) returns (process.ListResponse)',
    'Connect(process.ConnectRequest) returns (stream process.ConnectResponse)',
    'Start(process.StartRequest) returns (stream process.StartResponse)',
    'Update(process.UpdateRequest) returns (process.UpdateResponse)',
    'StreamInput(stream process.StreamInputRequest) returns (process.StreamInputResponse)',
    'SendInput(process.SendInputRequest) returns (process.SendInputResponse)',
    'SendSignal(process.SendSignalRequest) returns (process.SendSignalResponse)',
    'CloseStdin(process.CloseStdinRequest) returns (process.CloseStdinResponse)',
  ],
};

function scalarName(t: ScalarType): string {
  return ScalarType[t].toLowerCase();
}

function describeField(f: DescField): string {
  let type: string;
  switch (f.fieldKind) {
    case 'scalar':
      type = scalarName(f.scalar);
      break;
    case 'enum':
      type = f.enum.typeName;
      break;
    case 'message':
      type = f.message.typeName;
      break;
    case 'list':
      type =
        'repeated ' +
        (f.listKind === 'scalar' ? scalarName(f.scalar) : f.listKind === 'enum' ? f.enum.typeName : f.message.typeName);
      break;
    case 'map': {
      const value = f.mapKind === 'scalar' ? scalarName(f.scalar) : f.mapKind === 'enum' ? f.enum.typeName : f.message.typeName;
      type = `map<${scalarName(f.mapKey)},${value}>`;
      break;
    }
  }
  const optional = f.proto.proto3Optional ? 'optional ' : '';
  const oneof = f.oneof ? ` oneof ${f.oneof.name}` : '';
  return `${f.name}=${f.number} ${optional}${type}${oneof}`;
}

function allMessages(file: DescFile): DescMessage[] {
  const out: DescMessage[] = [];
  const walk = (m: DescMessage) => {
    out.push(m);
    m.nestedMessages.forEach(walk);
  };
  file.messages.forEach(walk);
  return out;
}

function allEnums(file: DescFile): DescEnum[] {
  return [...file.enums, ...allMessages(file).flatMap((m) => m.nestedEnums)];
}

const files = [file_filesystem_filesystem, file_process_process];

describe('envd proto descriptors match the wire listing', () => {
  test('packages are filesystem and process', () => {
    expect(files.map((f) => f.proto.package)).toEqual(['filesystem', 'process']);
  });

  test('the same messages exist, no more and no fewer', () => {
    const actual = files.flatMap(allMessages).map((m) => m.typeName).sort();
    expect(actual).toEqual(Object.keys(expectedMessages).sort());
  });

  test.each(Object.entries(expectedMessages))('%s has the listed fields', (name, fields) => {
    const msg = files.flatMap(allMessages).find((m) => m.typeName === name);
    expect(msg).toBeDefined();
    expect(msg!.fields.map(describeField)).toEqual(fields);
  });

  test('enums have the listed values', () => {
    const actual = Object.fromEntries(
      files.flatMap(allEnums).map((e) => [e.typeName, e.values.map((v) => `${v.name}=${v.number}`)]),
    );
    expect(actual).toEqual(expectedEnums);
  });

  test('services have the listed RPCs and streaming kinds', () => {
    const actual = Object.fromEntries(
      files.flatMap((f) => f.services).map((s) => [
        s.typeName,
        s.methods.map((m) => {
          const inStream = m.methodKind === 'client_streaming' || m.methodKind === 'bidi_streaming' ? 'stream ' : '';
          const outStream = m.methodKind === 'server_streaming' || m.methodKind === 'bidi_streaming' ? 'stream ' : '';
          return `${m.name}(${inStream}${m.input.typeName}) returns (${outStream}${m.output.typeName})`;
        }),
      ]),
    );
    expect(actual).toEqual(expectedServices);
  });
});
