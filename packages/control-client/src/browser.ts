// The browser build (the `browser` and `default` conditions of package.json): fetch only, no
// Node built-ins.
export * from './common.js';
export { ControlClient } from './control-client.js';
