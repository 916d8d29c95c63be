// What a web app bundles: the SDK's browser build, through its `browser`
// export conditions and those of its dependencies.
export { CommandExitError, Sandbox } from '@paddock/sdk';
