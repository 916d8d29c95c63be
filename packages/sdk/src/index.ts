export {
  DEFAULT_API_URL,
  DEFAULT_DOMAIN,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_SANDBOX_TIMEOUT_MS,
  DEFAULT_SANDBOX_URL,
  type ConnectionOpts,
  type RequestOpts,
} from './config.js';
export {
  AuthenticationError,
  CommandExitError,
  FileNotFoundError,
  InvalidArgumentError,
  NotEnoughSpaceError,
  NotFoundError,
  RateLimitError,
  SandboxError,
  SandboxNotFoundError,
  TemplateError,
  TimeoutError,
  type CommandResult,
  type SandboxErrorOptions,
} from './errors.js';
