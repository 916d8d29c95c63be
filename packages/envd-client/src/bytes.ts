/** `pieces` copied in order into one array of its own (never a view of any of them). */
export function joinBytes(pieces: Uint8Array[], size = pieces.reduce((n, p) => n + p.length, 0)): Uint8Array {
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const piece of pieces) {
    bytes.set(piece, at);
    at += piece.length;
  }
  return bytes;
}
