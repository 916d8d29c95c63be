import { isIP, type Socket } from 'node:net';

/** A request the proxy will not pass on, with the status that tells the client why. */
export class HeadError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const TERMINATOR = Buffer.from('\r\n\r\n');

/**
 * Reads from a paused or fresh socket until the end of the first request's
 * head. Everything read, head and any bytes after it, is returned to be
 * replayed upstream; the socket is left paused.
 */
export function readHead(socket: Socket, maxBytes: number, timeoutMs: number): Promise<{ bytes: Buffer; headLength: number }> {
  return new Promise((resolve, reject) => {
    let buffer = Buffer.alloc(0);
    const finish = (err: Error | undefined, headLength = 0) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onEnd);
      socket.pause();
      if (err) reject(err);
      else resolve({ bytes: buffer, headLength });
    };
    const onData = (chunk: Buffer) => {
      const from = Math.max(0, buffer.length - TERMINATOR.length + 1);
      buffer = Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf(TERMINATOR, from);
      if (end >= 0 && end + TERMINATOR.length <= maxBytes) finish(undefined, end + TERMINATOR.length);
      else if (buffer.length >= maxBytes) finish(new HeadError(431, `request head is larger than ${maxBytes} bytes`));
    };
    const onEnd = () => finish(new HeadError(400, 'connection ended before the request head did'));
    const timer = setTimeout(
      () => finish(new HeadError(408, `request head did not arrive within ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('close', onEnd);
  });
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// A DNS name (letters, digits, hyphens, underscores in labels), an IPv4
// literal, or a bracketed IPv6 literal; then an optional port.
const HOST = /^(?:([A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?)|\[([0-9A-Fa-f:.]+)\])(?::(\d{1,5}))?$/;

/** The host a `Host` value or an authority names, lower case, without port or trailing dot. */
export function hostOf(authority: string): string | undefined {
  const m = HOST.exec(authority);
  if (!m) return undefined;
  if (m[2] !== undefined) return isIP(m[2]) === 6 ? m[2].toLowerCase() : undefined;
  const name = m[1]!.toLowerCase().replace(/\.$/, '');
  return name.length <= 253 ? name : undefined;
}

/**
 * The host the first request of a connection is for. Only the request line
 * and `Host` are read, and anything two HTTP parsers could read differently
 * is refused: no Host or several, a folded or malformed header line, a bare
 * CR or LF, an absolute-form target naming another host, CONNECT.
 */
export function requestHost(head: Buffer): string {
  const text = head.toString('latin1');
  const lines = text.slice(0, text.length - 4).split('\r\n');
  if (lines.some((l) => l.includes('\r') || l.includes('\n'))) {
    throw new HeadError(400, 'request head has a bare CR or LF');
  }
  const requestLine = /^(\S+) (\S+) HTTP\/\d\.\d$/.exec(lines[0]!);
  if (!requestLine || !TOKEN.test(requestLine[1]!)) {
    throw new HeadError(400, `malformed request line '${lines[0]!.slice(0, 100)}'`);
  }
  const [, method, target] = requestLine as unknown as [string, string, string];
  if (method === 'CONNECT') throw new HeadError(400, 'CONNECT is not passed on');
  const hosts: string[] = [];
  for (const line of lines.slice(1)) {
    if (line.startsWith(' ') || line.startsWith('\t')) throw new HeadError(400, 'request head has a folded header line');
    const colon = line.indexOf(':');
    if (colon <= 0 || !TOKEN.test(line.slice(0, colon))) {
      throw new HeadError(400, `malformed header line '${line.slice(0, 100)}'`);
    }
    if (line.slice(0, colon).toLowerCase() === 'host') hosts.push(line.slice(colon + 1).trim());
  }
  if (hosts.length === 0) throw new HeadError(400, 'request has no Host header');
  if (hosts.length > 1) throw new HeadError(400, 'request has more than one Host header');
  const host = hostOf(hosts[0]!);
  if (host === undefined) throw new HeadError(400, `Host '${hosts[0]!.slice(0, 100)}' is not a host name or address`);
  // A server takes an absolute-form target's authority over Host (RFC 9112 3.2.2).
  const absolute = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/.exec(target);
  if (absolute) {
    const authority = absolute[1]!.replace(/^.*@/, '');
    if (hostOf(authority) !== host) {
      throw new HeadError(400, `request target names '${authority.slice(0, 100)}' but Host names '${host}'`);
    }
  }
  return host;
}
