// The one error hierarchy of the SDK. Every failure the SDK throws is a
// SandboxError; `cause` keeps the client error (ControlApiError,
// EnvdHttpError, ConnectError…) it was built from.

/** Options of a {@link SandboxError}. */
export interface SandboxErrorOptions {
  /** The error this one was built from. */
  cause?: unknown;
  /** HTTP status of the answer that produced the error, when there was one. */
  statusCode?: number | undefined;
}

/** Base of every error the SDK throws. */
export class SandboxError extends Error {
  /** Name of the class, for telling errors apart without `instanceof`. */
  override readonly name: string = 'SandboxError';
  /** HTTP status of the answer that produced the error, when there was one. */
  readonly statusCode: number | undefined;

  /** @param message - What went wrong. */
  constructor(message: string, options: SandboxErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.statusCode = options.statusCode;
  }
}

/** A deadline passed: the request timeout (`requestTimeoutMs`), or a command's or watch's `timeoutMs`. */
export class TimeoutError extends SandboxError {
  override readonly name: string = 'TimeoutError';
}

/** An argument was refused, by the SDK before sending or by the server. */
export class InvalidArgumentError extends SandboxError {
  override readonly name: string = 'InvalidArgumentError';
}

/** The sandbox's disk is full. */
export class NotEnoughSpaceError extends SandboxError {
  override readonly name: string = 'NotEnoughSpaceError';
}

/** Something does not exist: a template, a process. Files and sandboxes have their own subclasses. */
export class NotFoundError extends SandboxError {
  override readonly name: string = 'NotFoundError';
}

/** A file or directory inside the sandbox does not exist. */
export class FileNotFoundError extends NotFoundError {
  override readonly name: string = 'FileNotFoundError';
}

/**
 * The sandbox does not exist or is no longer running (killed, expired or
 * paused), whichever method found out: a control API call answered 404, or
 * the sandbox proxy answered that it has no running sandbox of that ID.
 */
export class SandboxNotFoundError extends NotFoundError {
  override readonly name: string = 'SandboxNotFoundError';
}

/**
 * The service could not be reached at all: the control API or the sandbox
 * proxy refused the connection, reset it, or its name did not resolve. Not
 * the same as a sandbox that is gone (`SandboxNotFoundError`): the sandbox
 * may be fine, the network path to it is not.
 */
export class ConnectionError extends SandboxError {
  override readonly name: string = 'ConnectionError';
}

/** Missing or refused credentials: the API key, or the sandbox's access token. */
export class AuthenticationError extends SandboxError {
  override readonly name: string = 'AuthenticationError';
}

/** A git command in the sandbox was refused credentials (or needed some and had none). */
export class GitAuthError extends AuthenticationError {
  override readonly name: string = 'GitAuthError';
}

/** A git push or pull had no upstream branch to go to or come from. */
export class GitUpstreamError extends SandboxError {
  override readonly name: string = 'GitUpstreamError';
}

/** A template build failed, or could not be started. */
export class BuildError extends SandboxError {
  override readonly name: string = 'BuildError';
}

/** The files of a template's COPY step could not be read, packed or uploaded. */
export class FileUploadError extends BuildError {
  override readonly name: string = 'FileUploadError';
}

/** Too many requests (HTTP 429). */
export class RateLimitError extends SandboxError {
  override readonly name: string = 'RateLimitError';
}

/** The sandbox's template or envd cannot do what was asked (an envd too old for a feature). */
export class TemplateError extends SandboxError {
  override readonly name: string = 'TemplateError';
}

/** What a finished command left behind. */
export interface CommandResult {
  /** Exit code; 0 is success. */
  exitCode: number;
  /** What envd reported when the process failed (e.g. `signal: killed`). */
  error: string | undefined;
  /** Everything the command wrote to stdout. */
  stdout: string;
  /** Everything the command wrote to stderr. */
  stderr: string;
}

/** A command exited with a non-zero code; its output is kept. */
export class CommandExitError extends SandboxError implements CommandResult {
  override readonly name: string = 'CommandExitError';
  readonly exitCode: number;
  readonly error: string | undefined;
  readonly stdout: string;
  readonly stderr: string;

  /** @param result - The finished command's exit code, error and output. */
  constructor(result: CommandResult) {
    super(`command exited with code ${result.exitCode}${result.error ? `: ${result.error}` : ''}`);
    this.exitCode = result.exitCode;
    this.error = result.error;
    this.stdout = result.stdout;
    this.stderr = result.stderr;
  }
}
