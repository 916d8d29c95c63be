// The Node build (the `node` and `default` conditions of package.json).
export * from './common.js';
export { ControlClient } from './node.js';
