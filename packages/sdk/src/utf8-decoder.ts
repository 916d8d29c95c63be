// Streaming UTF-8 decoding of a command's output, chunk by chunk.
//
// `TextDecoder.decode(bytes, { stream: true })` would do, but Node.js takes
// its slow general converter for streaming calls (its fast UTF-8 path is for
// whole inputs only), and for output of many MiB that decoding was the
// largest cost of the whole command. So each chunk is decoded whole, up to
// a multi-byte character cut at its end, whose bytes wait for the next one.
// The text is the same a streaming TextDecoder gives.

/** Bytes in the UTF-8 sequence that `lead` starts; 0 for a byte that starts none. */
function sequenceLength(lead: number): number {
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

/**
 * Where a character cut at the end of `bytes` begins; `bytes.length` when
 * none is. Only a lead byte among the last three can start one.
 */
function completeLength(bytes: Uint8Array): number {
  for (let i = bytes.length - 1; i >= 0 && i >= bytes.length - 3; i--) {
    const byte = bytes[i]!;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const needed = sequenceLength(byte);
    return needed > 0 && i + needed > bytes.length ? i : bytes.length;
  }
  return bytes.length;
}

export class Utf8StreamDecoder {
  // The BOM is dropped once, at the start of the stream, as TextDecoder does;
  // one inside the output (at the start of a later chunk) is kept.
  readonly #decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  #pending: Uint8Array | undefined;
  #started = false;

  /** The text of `chunk`, without a character cut at its end: that comes with the next chunk. */
  decode(chunk: Uint8Array): string {
    let bytes = chunk;
    if (this.#pending) {
      bytes = new Uint8Array(this.#pending.length + chunk.length);
      bytes.set(this.#pending);
      bytes.set(chunk, this.#pending.length);
      this.#pending = undefined;
    }
    const end = completeLength(bytes);
    if (end < bytes.length) this.#pending = bytes.slice(end);
    return this.#text(end === bytes.length ? bytes : bytes.subarray(0, end));
  }

  /** What is left at the end of the stream: a cut character shows as U+FFFD. */
  flush(): string {
    const rest = this.#pending;
    this.#pending = undefined;
    return rest ? this.#text(rest) : '';
  }

  #text(bytes: Uint8Array): string {
    if (bytes.length === 0) return '';
    const text = this.#decoder.decode(bytes);
    if (this.#started) return text;
    this.#started = true;
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  }
}
