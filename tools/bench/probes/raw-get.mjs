// The probes' floor of a client: a GET written on one kept socket, whose
// answer is read only as far as its head and counted to its Content-Length.
// No parsing beyond that, no per-request objects, no streams.
//
//   const get = rawGetter((onConnect) => connect(port, host, onConnect), 'GET /x HTTP/1.1\r\nHost: h\r\n\r\n');
//   const bytes = await get();
//   get.close();

/**
 * A function that sends `head` on the socket `open` made (once) and resolves
 * with the body's length; its `close()` closes that socket.
 */
export function rawGetter(open, head) {
  let sock;
  const get = () =>
    new Promise((resolve, reject) => {
      const go = () => {
        let pending = Buffer.alloc(0);
        let want = -1;
        let got = 0;
        const onData = (b) => {
          if (want < 0) {
            pending = Buffer.concat([pending, b]);
            const end = pending.indexOf('\r\n\r\n');
            if (end < 0) return;
            const text = pending.subarray(0, end).toString('latin1');
            if (!text.startsWith('HTTP/1.1 200 ')) {
              sock.off('data', onData);
              return reject(new Error(`raw GET: ${text.split('\r\n')[0]}`));
            }
            want = Number(/content-length: (\d+)/i.exec(text)[1]);
            got = pending.length - end - 4;
          } else {
            got += b.length;
          }
          if (got >= want) {
            sock.off('data', onData);
            resolve(got);
          }
        };
        sock.on('data', onData);
        sock.write(head);
      };
      if (sock) return go();
      sock = open(go);
      sock.on('error', reject);
    });
  get.close = () => sock?.destroy();
  return get;
}
