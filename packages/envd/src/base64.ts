// Uint8Array.prototype.toBase64 (TC39, in V8 since Node 25) for older Node.
// protobuf-es writes the bytes fields of JSON messages with it when the
// runtime has it and one character at a time otherwise: a command's output
// then streamed to a JSON client (the official SDKs speak JSON) at ~8 MiB/s,
// with envd busy encoding. Buffer does the same encoding natively. This
// module must be evaluated before protobuf-es, which looks the method up once.

type Alphabet = 'base64' | 'base64url';

function toBase64(this: Uint8Array, options?: { alphabet?: Alphabet; omitPadding?: boolean }): string {
  const alphabet = options?.alphabet ?? 'base64';
  if (alphabet !== 'base64' && alphabet !== 'base64url') throw new TypeError(`unknown base64 alphabet '${String(alphabet)}'`);
  const bytes = Buffer.from(this.buffer, this.byteOffset, this.byteLength);
  // Node pads standard base64 and never pads base64url.
  const text = bytes.toString(alphabet);
  if (options?.omitPadding) return text.replace(/=+$/, '');
  return alphabet === 'base64url' ? text + '='.repeat((4 - (text.length % 4)) % 4) : text;
}

const proto = Uint8Array.prototype as { toBase64?: unknown };
if (typeof proto.toBase64 !== 'function') {
  Object.defineProperty(Uint8Array.prototype, 'toBase64', { value: toBase64, writable: true, configurable: true });
}
