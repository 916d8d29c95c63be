// The Node build (the `node` condition of package.json).
export * from './common.js';
export { EnvdClient, type NodeEnvdClientOptions } from './node.js';
export { createNodeTransport, type NodeTransportOptions } from './node-transport.js';
