// `paddock config`: the configuration a `paddock start` here would run
// with, each value with where it came from.
import { CONFIG_KEYS, explainServerConfig, fileKey } from '@paddock/server';
import { printJson, style } from '../output.js';

export function showConfig(opts: { home?: string; configFile?: string; json?: boolean }): void {
  const { config, sources } = explainServerConfig({ ...(opts.home ? { home: opts.home } : {}), ...(opts.configFile ? { configFile: opts.configFile } : {}) });
  const rows = CONFIG_KEYS.map((k) => ({ key: fileKey(k), value: config[k.key], source: sources[k.key] === 'env' ? k.env : sources[k.key] === 'option' ? 'flag' : sources[k.key] }));
  if (opts.json) {
    printJson({ configFile: config.configFile ?? null, settings: rows });
    return;
  }
  const shown = (v: unknown) => (v === undefined ? style.dim('(unset)') : Array.isArray(v) ? v.join(', ') || style.dim('(none)') : String(v));
  const width = Math.max(...rows.map((r) => r.key.length));
  const lines = [
    `${style.dim('configuration file:')} ${config.configFile ?? style.dim('none (--config or PADDOCK_CONFIG names one)')}`,
    ...rows.map((r) => `${r.key.padEnd(width)}  ${shown(r.value)}  ${style.dim(`(${r.source})`)}`),
  ];
  process.stdout.write(lines.join('\n') + '\n');
}
