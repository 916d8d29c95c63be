export { ALWAYS_DENIED_V4, type AddressRules, type WebRedirect } from './addresses.js';
export {
  DEFAULT_NETWORK_NAME,
  DEFAULT_NETWORK_POOL_SIZE,
  AUTO_SUBNET_RANGE,
  CLAIMS_DIR,
  SANDBOX_INTERFACE,
  SandboxNetworks,
  type HostServiceOptions,
  type PrepareResult,
  type SandboxNetwork,
  type SandboxNetworksOptions,
} from './sandbox-networks.js';
