// An e2b program: connection options and the error classes.
import {
  AuthenticationError,
  InvalidArgumentError,
  NotFoundError,
  RateLimitError,
  Sandbox,
  SandboxError,
  SandboxNotFoundError,
  TemplateError,
  TimeoutError,
  type ConnectionOpts,
  type Logger,
} from 'e2b';

const logger: Logger = { info: (...args) => console.log(...args), error: (...args) => console.error(...args) };
const connection: ConnectionOpts = { apiKey: 'key', domain: 'example.com', requestTimeoutMs: 10_000, retries: 2, logger, debug: false };

export async function main(): Promise<void> {
  try {
    const sbx = await Sandbox.create('base', { ...connection, timeoutMs: 30_000, logger: console });
    await sbx.kill();
    await sbx.commands.run('true');
  } catch (err) {
    if (err instanceof SandboxNotFoundError) console.error('gone', err.message);
    else if (err instanceof NotFoundError) console.error('no template');
    else if (err instanceof TimeoutError || err instanceof RateLimitError) console.error('later');
    else if (err instanceof AuthenticationError || err instanceof InvalidArgumentError || err instanceof TemplateError) throw err;
    else if (err instanceof SandboxError) console.error(err.statusCode);
  }
  console.log(await Sandbox.getInfo('id', { ...connection, signal: AbortSignal.timeout(1000) }));
}
