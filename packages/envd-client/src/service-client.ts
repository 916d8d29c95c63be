// Clients of envd's Connect services. They are connect's promise clients,
// except for server-streaming methods (Start, Connect, WatchDir), which are
// called here with less in between.
//
// connect's promise client hands the transport its one request message as an
// async generator, and hands the caller each response message through three
// more (TypeScript's downleveled generator helpers), each a few promises per
// message. A `commands.run('true')` reads three times (start, end, the end
// of the stream), so that was a good part of the client's work on a short
// command. Here the request is a `OneMessage`, which a transport may read
// without awaiting it (node-transport.ts does), and the caller reads the
// transport's own message iterator. What a caller sees is the same: the
// call starts at once, `onHeader` runs before the first message and
// `onTrailer` after the last, and the iterator has no `return` or `throw`.
import type { DescMessage, DescMethodServerStreaming, DescService, MessageInitShape, MessageShape } from '@bufbuild/protobuf';
import { createClient, type CallOptions, type Client, type StreamResponse, type Transport } from '@connectrpc/connect';

/** A request stream of exactly one message, known when the call starts. */
export class OneMessage<T> implements AsyncIterable<T> {
  constructor(readonly message: T) {}

  /** Iterates as a generator yielding the message would, `return` and `throw` included (connect's transports call them). */
  [Symbol.asyncIterator](): AsyncIterator<T> {
    let read = false;
    return {
      next: () => {
        if (read) return Promise.resolve({ done: true, value: undefined });
        read = true;
        return Promise.resolve({ done: false, value: this.message });
      },
      return: (value?: unknown) => {
        read = true;
        return Promise.resolve({ done: true, value });
      },
      throw: (err?: unknown) => {
        read = true;
        return Promise.reject(err);
      },
    };
  }
}

function serverStreamingFn<I extends DescMessage, O extends DescMessage>(
  transport: Transport,
  method: DescMethodServerStreaming<I, O>,
): (input: MessageInitShape<I>, options?: CallOptions) => AsyncIterable<MessageShape<O>> {
  return (input, options) => {
    const call = transport.stream(method, options?.signal, options?.timeoutMs, options?.headers, new OneMessage(input), options?.contextValues);
    let response: StreamResponse<I, O> | undefined;
    let messages: AsyncIterator<MessageShape<O>> | undefined;
    let opening: Promise<void> | undefined;
    let ended = false;
    const open = (): Promise<void> =>
      (opening ??= call.then((res) => {
        options?.onHeader?.(res.header);
        response = res;
        messages = res.message[Symbol.asyncIterator]();
      }));
    const read = async (): Promise<IteratorResult<MessageShape<O>>> => {
      const item = await messages!.next();
      if (item.done && !ended) {
        ended = true;
        options?.onTrailer?.(response!.trailer);
      }
      return item;
    };
    return {
      [Symbol.asyncIterator]: () => ({
        next: () => (messages ? read() : open().then(read)),
      }),
    };
  };
}

/** A promise client of `service` over `transport`, with the lighter server streams described above. */
export function createServiceClient<S extends DescService>(service: S, transport: Transport): Client<S> {
  const client = createClient(service, transport) as Record<string, unknown>;
  for (const method of service.methods) {
    if (method.methodKind === 'server_streaming') client[method.localName] = serverStreamingFn(transport, method as DescMethodServerStreaming);
  }
  return client as Client<S>;
}
