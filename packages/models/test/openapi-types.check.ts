// Type-level checks of the types generated from openapi/*.yaml. This file is
// compiled by openapi-types.test.ts (and by `npm run typecheck`); it has no
// runtime behaviour. Each `@ts-expect-error` must see an error, or the
// compile fails.
import type { control, envd } from '../src/index.js';

type Schemas = control.components['schemas'];
type RequiredKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T];
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

export const sandboxRequired: Same<RequiredKeys<Schemas['Sandbox']>, 'templateID' | 'sandboxID' | 'clientID' | 'envdVersion'> =
  true;
export const newSandboxRequired: Same<RequiredKeys<Schemas['NewSandbox']>, 'templateID'> = true;
export const templateWithBuildsRequired: Same<
  RequiredKeys<Schemas['TemplateWithBuilds']>,
  'templateID' | 'public' | 'aliases' | 'names' | 'createdAt' | 'updatedAt' | 'lastSpawnedAt' | 'spawnCount' | 'builds'
> = true;
export const errorRequired: Same<RequiredKeys<Schemas['Error']>, 'code' | 'message'> = true;

export const ok: Schemas['NewSandbox'] = { templateID: 'base', timeout: 30, metadata: { k: 'v' }, envVars: { A: '1' } };

// @ts-expect-error templateID is required
export const noTemplate: Schemas['NewSandbox'] = { timeout: 30 };

// @ts-expect-error timeout is a number of seconds
export const badTimeout: Schemas['NewSandbox'] = { templateID: 'base', timeout: '30' };

export const state: Schemas['SandboxState'][] = ['running', 'paused'];
// @ts-expect-error only running and paused are states
export const badState: Schemas['SandboxState'] = 'stopped';

export const nullableToken: Schemas['Sandbox']['trafficAccessToken'] = null;
export const lastSpawned: Schemas['TemplateWithBuilds']['lastSpawnedAt'] = null;

type CreateResponse = control.paths['/sandboxes']['post']['responses'][201]['content']['application/json'];
export const createIsSandbox: Same<CreateResponse, Schemas['Sandbox']> = true;

type Metrics = envd.components['schemas']['Metrics'];
export const metrics: Metrics = { ts: 1, cpu_count: 2, cpu_used_pct: 0.5, mem_total: 1, mem_used: 1, disk_used: 1, disk_total: 2 };
