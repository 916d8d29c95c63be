// The browser build (the `browser` and `default` conditions of package.json): fetch and
// connect-web, no Node built-ins. `createNodeTransport` is Node's alone.
export * from './common.js';
export { EnvdClient } from './envd-client.js';
