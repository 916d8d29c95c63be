// Answers for old Python SDKs. Their client sends the User-Agent
// `connect-python` and parses JSON with the filesystem messages of its own
// time: an entry is {name, type, path}, an event {name, type}, and a file
// type it does not know by name (FILE_TYPE_SYMLINK) fails the parse. As
// E2B's envd does for that User-Agent, the filesystem service's answers
// keep only those fields, enum values go out as numbers (which every
// protobuf JSON reader takes), and the answer says `x-e2b-legacy-sdk: true`.
import { create, isMessage, type Message } from '@bufbuild/protobuf';
import type { Interceptor } from '@connectrpc/connect';
import { EntryInfoSchema, FilesystemEventSchema, Filesystem } from '@paddock/models';
import type { IncomingMessage } from 'node:http';

/** The User-Agent of the Python SDKs whose messages predate symlinks and entry details. */
export const LEGACY_USER_AGENT = 'connect-python';
export const LEGACY_HEADER = 'x-e2b-legacy-sdk';

export function isLegacyClient(req: IncomingMessage): boolean {
  return req.headers['user-agent'] === LEGACY_USER_AGENT;
}

/** The fields an old client knows, and nothing else, anywhere in a message. */
function trim(value: unknown): unknown {
  if (isMessage(value, EntryInfoSchema)) return create(EntryInfoSchema, { name: value.name, type: value.type, path: value.path });
  if (isMessage(value, FilesystemEventSchema)) return create(FilesystemEventSchema, { name: value.name, type: value.type });
  if (Array.isArray(value)) return value.map(trim);
  if (value && typeof value === 'object' && '$typeName' in value) {
    const m = value as Message & Record<string, unknown>;
    for (const [k, v] of Object.entries(m)) {
      if (k === '$typeName' || k === '$unknown') continue;
      // A oneof: { case, value }.
      if (v && typeof v === 'object' && 'case' in v && 'value' in v) (v as { value: unknown }).value = trim((v as { value: unknown }).value);
      else if (v && typeof v === 'object') m[k] = trim(v);
    }
  }
  return value;
}

async function* trimmed<T>(stream: AsyncIterable<T>): AsyncIterable<T> {
  for await (const m of stream) yield trim(m) as T;
}

/** Trims the filesystem service's answers to what an old client parses. */
export const legacyAnswers: Interceptor = (next) => async (req) => {
  const res = await next(req);
  res.header.set(LEGACY_HEADER, 'true');
  if (req.service.typeName !== Filesystem.typeName) return res;
  if (res.stream) return { ...res, message: trimmed(res.message) };
  return { ...res, message: trim(res.message) as typeof res.message };
};
