/**
 * What gRPC reflection serves, in its own module: @grpc/proto-loader (and protobufjs under it) load
 * only in a process that serves reflection, which is off by default (libs/grpc imports this module
 * when it is on).
 */
import { readFileSync } from 'node:fs';
import * as protoLoader from '@grpc/proto-loader';
import { DESCRIPTOR_SET, loadSchema } from './schema.js';

/**
 * A proto-loader package definition of the descriptor set, as @grpc/reflection takes it, and the
 * services declared in `files` (names relative to proto/), which reflection is limited to.
 */
export function reflectionDefinition(
  files: string[],
  path = DESCRIPTOR_SET,
): { definition: protoLoader.PackageDefinition; services: string[] } {
  const schema = loadSchema(path);
  const services = schema.files
    .filter((f) => files.includes(f.proto.name))
    .flatMap((f) => f.services.map((s) => s.typeName));
  return { definition: protoLoader.loadFileDescriptorSetFromBuffer(readFileSync(path), { keepCase: true }), services };
}
