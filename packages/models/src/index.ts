// Everything generated from the contracts, in one place.
//
// Protobuf messages, enums and service descriptors of envd's Connect API are
// exported by name (they do not collide). The OpenAPI types come as two
// namespaces, because both specs generate `paths`, `components` and
// `operations`.
export * from './gen/filesystem/filesystem_pb.js';
export * from './gen/process/process_pb.js';
export type * as control from './gen/control.gen.js';
export type * as envd from './gen/envd.gen.js';
