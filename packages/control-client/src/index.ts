// The Node build (the `node` condition of package.json).
export * from './common.js';
export { ControlClient, type NodeTemplateFilesBody } from './node.js';
