import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';

/** The repository's proto/ folder: the single source of every API definition. */
export const PROTO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'proto');

const require = createRequire(import.meta.url);
/** protobufjs ships descriptor.proto (needed by custom options) beside its own copies of the well-known types. */
const PROTOBUFJS_INCLUDE = dirname(require.resolve('protobufjs/package.json'));

/** Loads .proto files (paths relative to PROTO_ROOT) with their options, for the gateway's transcoder. */
export function loadProtoRoot(files: string[]): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    if (target.startsWith('google/protobuf/')) {
      // Well-known types other than descriptor.proto are built into protobufjs.
      return target === 'google/protobuf/descriptor.proto' ? join(PROTOBUFJS_INCLUDE, target) : target;
    }
    return join(PROTO_ROOT, target);
  };
  root.loadSync(files, { keepCase: true });
  root.resolveAll();
  return root;
}

/** A proto-loader package definition, as @grpc/reflection needs. */
export function loadPackageDefinition(files: string[]): protoLoader.PackageDefinition {
  return protoLoader.loadSync(files, {
    includeDirs: [PROTO_ROOT, PROTOBUFJS_INCLUDE],
    keepCase: true,
  });
}

export * from './json-mapping.js';
export { resourceJsonOf, type ResourceJson, type MessageEncoder } from './resource-json.js';
