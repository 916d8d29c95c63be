// The streaming UTF-8 decoder of command output gives what a streaming
// TextDecoder gives, however the bytes are cut into chunks.
import { Utf8StreamDecoder } from '../src/utf8-decoder.js';

/** What TextDecoder makes of `chunks` as one stream, and what Utf8StreamDecoder does, flush included. */
function both(chunks: Uint8Array[]): { expected: string; actual: string } {
  const reference = new TextDecoder();
  const ours = new Utf8StreamDecoder();
  let expected = '';
  let actual = '';
  for (const c of chunks) {
    expected += reference.decode(c, { stream: true });
    actual += ours.decode(c);
  }
  return { expected: expected + reference.decode(), actual: actual + ours.flush() };
}

/** `bytes` cut at the given offsets. */
function cut(bytes: Uint8Array, at: number[]): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  let from = 0;
  for (const to of [...at, bytes.length]) {
    chunks.push(bytes.subarray(from, to));
    from = to;
  }
  return chunks;
}

const utf8 = (s: string) => new TextEncoder().encode(s);

test('characters of two, three and four bytes cut at every position come out whole', () => {
  const bytes = utf8('aé€😀z');
  for (let i = 0; i <= bytes.length; i++) {
    for (let j = i; j <= bytes.length; j++) {
      const { expected, actual } = both(cut(bytes, [i, j]));
      expect(actual).toBe('aé€😀z');
      expect(actual).toBe(expected);
    }
  }
});

test('a character cut at the end of the stream is U+FFFD, as TextDecoder has it', () => {
  const { expected, actual } = both([utf8('ok'), new Uint8Array([0xf0, 0x9f, 0x98])]);
  expect(actual).toBe('ok\ufffd');
  expect(actual).toBe(expected);
});

test('a BOM is dropped at the start of the stream only', () => {
  const bom = [0xef, 0xbb, 0xbf];
  const bytes = new Uint8Array([...bom, 0x41, ...bom, 0x42]);
  for (let i = 0; i <= bytes.length; i++) {
    const { expected, actual } = both(cut(bytes, [i]));
    expect(actual).toBe('A\ufeffB');
    expect(actual).toBe(expected);
  }
});

test('random bytes, valid or not, in random chunks decode as TextDecoder decodes them', () => {
  // A fixed seed, so that a failure can be reproduced.
  let seed = 42;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const pieces = ['a', 'é', '€', '😀', '\n'].map(utf8);
  for (let round = 0; round < 300; round++) {
    const parts: number[] = [];
    while (parts.length < 200) {
      // Mostly valid text, with stray lead, continuation and invalid bytes.
      if (random() < 0.15) parts.push([0x80, 0xbf, 0xc0, 0xc3, 0xe0, 0xed, 0xf0, 0xf4, 0xf5, 0xff][Math.floor(random() * 10)]!);
      else parts.push(...pieces[Math.floor(random() * pieces.length)]!);
    }
    const bytes = new Uint8Array(parts);
    const at = Array.from({ length: Math.floor(random() * 12) }, () => Math.floor(random() * bytes.length)).sort((a, b) => a - b);
    const { expected, actual } = both(cut(bytes, at));
    expect(actual).toBe(expected);
  }
});
