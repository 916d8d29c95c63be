// Request validation comes from openapi/control.yaml itself: each operation
// becomes a route whose params, query and body schemas are taken from the
// document (local $refs inlined), so the spec is the one source of truth.
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parse } from 'yaml';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

export interface Operation {
  operationId: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** OpenAPI form, `/sandboxes/{sandboxID}`. */
  path: string;
  /** Router form, `/sandboxes/:sandboxID`. */
  routePath: string;
  schema: { params?: JsonObject; querystring?: JsonObject; body?: JsonObject };
  /** Whether a request body must be sent. */
  bodyRequired: boolean;
  /** Query parameters that are arrays sent as one comma-separated value (style form, explode false). */
  commaArrays: string[];
  /** Operations with `security: []` need no API key. */
  public: boolean;
  /** Operations that also take their credential as `Authorization: Bearer` (AdminKeyBearerAuth). */
  bearerKey: boolean;
  /** Operations that take the admin credential only (AdminKeyAuth). */
  admin: boolean;
}

/**
 * Where the spec is: copied next to the build, or at the repository root
 * when running from source (the build's copy may be older than the spec).
 */
export function specPath(): string {
  const copy = join(import.meta.dirname, '../openapi/control.yaml');
  const root = join(import.meta.dirname, '../../../openapi/control.yaml');
  const candidates = basename(import.meta.dirname) === 'src' ? [root, copy] : [copy, root];
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`openapi/control.yaml not found (looked in ${candidates.join(', ')})`);
  return found;
}

function isObject(v: Json | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Inlines every local `$ref` of `node`. */
function deref(doc: JsonObject, node: Json, seen: string[] = []): Json {
  if (Array.isArray(node)) return node.map((n) => deref(doc, n, seen));
  if (!isObject(node)) return node;
  const ref = node.$ref;
  if (typeof ref === 'string') {
    if (!ref.startsWith('#/')) throw new Error(`only local $refs are supported, found '${ref}'`);
    if (seen.includes(ref)) throw new Error(`circular $ref '${ref}'`);
    let target: Json | undefined = doc;
    for (const part of ref.slice(2).split('/')) target = isObject(target) ? target[part.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
    if (target === undefined) throw new Error(`unresolved $ref '${ref}'`);
    return deref(doc, target, [...seen, ref]);
  }
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(node)) {
    // A hint for code generators; oneOf alone validates the same values.
    if (k === 'discriminator') continue;
    out[k] = deref(doc, v, seen);
  }
  return out;
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

export function loadOperations(file = specPath()): Operation[] {
  const doc = parse(readFileSync(file, 'utf8')) as JsonObject;
  const paths = doc.paths;
  if (!isObject(paths)) throw new Error(`${file} has no paths`);
  const ops: Operation[] = [];
  for (const [path, rawItem] of Object.entries(paths)) {
    const item = deref(doc, rawItem) as JsonObject;
    const shared = (item.parameters as JsonObject[] | undefined) ?? [];
    for (const method of METHODS) {
      const op = item[method];
      if (!isObject(op)) continue;
      const params = [...shared, ...((op.parameters as JsonObject[] | undefined) ?? [])];
      const schema: Operation['schema'] = {};
      const commaArrays: string[] = [];
      for (const where of ['path', 'query'] as const) {
        const ps = params.filter((p) => p.in === where);
        if (ps.length === 0) continue;
        const properties: JsonObject = {};
        const required: string[] = [];
        for (const p of ps) {
          const name = p.name as string;
          const s = p.schema as JsonObject;
          properties[name] = s;
          if (p.required || where === 'path') required.push(name);
          if (where === 'query' && s.type === 'array' && p.explode === false) commaArrays.push(name);
        }
        schema[where === 'path' ? 'params' : 'querystring'] = { type: 'object', properties, ...(required.length ? { required } : {}) };
      }
      const body = isObject(op.requestBody) ? op.requestBody : undefined;
      const bodySchema = body && isObject(body.content) && isObject(body.content['application/json']) ? body.content['application/json'].schema : undefined;
      if (isObject(bodySchema)) schema.body = bodySchema;
      ops.push({
        operationId: op.operationId as string,
        method: method.toUpperCase() as Operation['method'],
        path,
        routePath: path.replace(/\{([^}]+)\}/g, ':$1'),
        schema,
        bodyRequired: Boolean(body?.required),
        commaArrays,
        public: Array.isArray(op.security) && op.security.length === 0,
        bearerKey: Array.isArray(op.security) && op.security.some((req) => isObject(req) && 'AdminKeyBearerAuth' in req),
        admin: Array.isArray(op.security) && op.security.length > 0 && op.security.every((req) => isObject(req) && ('AdminKeyAuth' in req || 'AdminKeyBearerAuth' in req)),
      });
    }
  }
  return ops;
}
