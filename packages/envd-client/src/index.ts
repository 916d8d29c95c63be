// The Node build (the `node` and `default` conditions of package.json).
export * from './common.js';
export { EnvdClient } from './node.js';
export { createNodeTransport, type NodeTransportOptions } from './node-transport.js';
