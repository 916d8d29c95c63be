// `E2B`: a client with its connection options bound, as E2B's SDK has one.
// Its `Sandbox` and `Template` are subclasses of the top-level ones whose
// static calls start from the client's options instead of the environment;
// options a call gives still win. Clients are independent of each other.
import { bindOptions, resolveConfig, type ConnectionOpts } from './config.js';
import { Sandbox } from './sandbox.js';
import { TemplateBase, callableTemplate, type CallableTemplate } from './template.js';

/** Options of `new E2B()`: how its calls reach the service. */
export type E2BClientOpts = ConnectionOpts;

/**
 * A client whose `Sandbox` and `Template` use the options it was made with
 * where a call leaves one out (E2B's SDK also has `Volume` and `Secret`,
 * which a Paddock server does not serve).
 *
 * ```ts
 * const client = new E2B({ apiKey, apiUrl: 'https://api.paddock.example' })
 * const sandbox = await client.Sandbox.create()
 * ```
 */
export class E2B {
  /** `Sandbox` with this client's options; sandboxes it makes or connects to are instances of it. */
  readonly Sandbox: typeof Sandbox;
  /** `Template` with this client's options: builders (`client.Template()`) and the build API (`client.Template.build`). */
  readonly Template: CallableTemplate;

  /** @param opts - The options every call through this client starts from. */
  constructor(opts: E2BClientOpts = {}) {
    const bound = { ...opts };
    // Checked now, so that a mistake shows where the client is made rather than at its first call.
    resolveConfig(bound);
    this.Sandbox = class extends Sandbox {};
    bindOptions(this.Sandbox, bound);
    const template = class extends TemplateBase {};
    bindOptions(template, bound);
    this.Template = callableTemplate(template);
  }
}
