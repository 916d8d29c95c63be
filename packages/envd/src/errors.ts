// One place that turns failures into what clients see: Connect errors for
// the RPC services, `{code, message}` bodies for the HTTP routes. Messages
// name the path or process that failed.
import { Code, ConnectError } from '@connectrpc/connect';

/**
 * An error of one of envd's own HTTP routes (/files, /init, /envs, ...),
 * answered as `{code, message}` with this status.
 */
export class EnvdRouteError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Thrown where a path has to be a regular file and is something else: a
 * FIFO, a device or a socket.
 */
export class NotRegularFileError extends Error {}

interface ErrnoLike {
  code?: unknown;
  message?: unknown;
}

function errnoOf(err: unknown): string | undefined {
  const code = (err as ErrnoLike | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** Describes a failed filesystem call on `path` in words a user can act on. */
export function describeFsError(err: unknown, path: string): { code: Code; status: number; message: string } {
  // ENXIO is what a non-blocking open of a FIFO nobody reads, or of a
  // socket, answers.
  if (err instanceof NotRegularFileError || errnoOf(err) === 'ENXIO') return { code: Code.InvalidArgument, status: 400, message: `path '${path}' is not a regular file` };
  switch (errnoOf(err)) {
    case 'ENOENT':
      return { code: Code.NotFound, status: 404, message: `path '${path}' does not exist` };
    case 'EEXIST':
      return { code: Code.AlreadyExists, status: 409, message: `path '${path}' already exists` };
    case 'EISDIR':
      return { code: Code.InvalidArgument, status: 400, message: `path '${path}' is a directory` };
    case 'ENOTDIR':
      return { code: Code.InvalidArgument, status: 400, message: `path '${path}': a component of it is not a directory` };
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return { code: Code.PermissionDenied, status: 403, message: `permission denied on '${path}'` };
    case 'ENOSPC':
    case 'EDQUOT':
      return { code: Code.ResourceExhausted, status: 507, message: `no space left on device writing '${path}'` };
    case 'ENAMETOOLONG':
      return { code: Code.InvalidArgument, status: 400, message: `path '${path}' is too long` };
    case 'ELOOP':
      return { code: Code.InvalidArgument, status: 400, message: `path '${path}' has too many levels of symbolic links` };
    case 'EXDEV':
      return { code: Code.InvalidArgument, status: 400, message: `cannot move '${path}' across filesystems` };
    case 'EAGAIN':
      // A non-blocking open or read that would have had to wait: a file
      // under another process's lease, or one that waits for data (/proc/kmsg).
      return { code: Code.FailedPrecondition, status: 409, message: `path '${path}' cannot be used now without waiting` };
    case 'ENOTEMPTY':
      return { code: Code.FailedPrecondition, status: 409, message: `directory '${path}' is not empty` };
    default: {
      const message = (err as ErrnoLike | null)?.message;
      return { code: Code.Internal, status: 500, message: `'${path}': ${typeof message === 'string' ? message : String(err)}` };
    }
  }
}

export function fsConnectError(err: unknown, path: string): ConnectError {
  if (err instanceof ConnectError) return err;
  const d = describeFsError(err, path);
  return new ConnectError(d.message, d.code, undefined, undefined, err);
}

export function fsRouteError(err: unknown, path: string): EnvdRouteError {
  if (err instanceof EnvdRouteError) return err;
  const d = describeFsError(err, path);
  return new EnvdRouteError(d.status, d.message);
}
