// The protocol's facts that clients and servers both need, written once.
// Nothing here touches the network, the filesystem or Node's own modules,
// so the SDK's browser entry can use it as the server does.
export { ENVD_PORT, SANDBOX_ID_PATTERN, isSandboxId, isTcpPort, parseSandboxHost, sandboxHost } from './sandbox.js';
export { ACCESS_TOKEN_HEADER, KEEPALIVE_PING_HEADER, SANDBOX_ID_HEADER, SANDBOX_PORT_HEADER, TRAFFIC_ACCESS_TOKEN_HEADER } from './headers.js';
export { MAX_METADATA_BYTES, MAX_METADATA_KEY_BYTES, METADATA_HEADER_PREFIX, metadataProblem } from './metadata.js';
export {
  FILE_SIGNATURE_EXPIRATION_PARAM,
  FILE_SIGNATURE_PARAM,
  encodeFileSignature,
  fileOperationOf,
  fileSignaturePayload,
  type FileOperation,
  type FileSignatureInput,
} from './file-signature.js';
export {
  answerFailure,
  asErrorLike,
  callFailure,
  describeFailure,
  errorKindOf,
  failureOf,
  withHttpCallFields,
  type ErrorBody,
  type ErrorKind,
  type ErrorLike,
  type HttpCallErrorDetails,
  type HttpCallFailure,
} from './errors.js';
