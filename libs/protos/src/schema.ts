/**
 * The API's schema at run time: the FileDescriptorSet `buf build` writes at build time (make proto:
 * every file of proto/ with its imports and source comments), read through @bufbuild/protobuf's
 * registry, and the ts-proto codec of each message by its full name. Nothing parses .proto text at
 * run time.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  createFileRegistry,
  fromBinary,
  getOption,
  hasOption,
  type DescEnum,
  type DescExtension,
  type DescField,
  type DescFile,
  type DescMessage,
  type DescMethod,
  type DescService,
  type FileRegistry,
} from '@bufbuild/protobuf';
import { FileDescriptorSetSchema, type SourceCodeInfo_Location } from '@bufbuild/protobuf/wkt';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { messageTypeRegistry } from './gen/typeRegistry.js';

/** The product's descriptor set (proto/), beside this package's dist/. */
export const DESCRIPTOR_SET = fileURLToPath(new URL('../descriptor.binpb', import.meta.url));
/** Test fixtures (libs/protos/test-protos): field kinds and annotations the real protos do not use. */
export const FIXTURES_DESCRIPTOR_SET = fileURLToPath(new URL('../fixtures.binpb', import.meta.url));

export interface Schema {
  registry: FileRegistry;
  /** Every file of the set, imports first (google/…, then workauto/…). */
  files: DescFile[];
}

const schemas = new Map<string, Schema>();

/** A descriptor set, read and resolved once per process. */
export function loadSchema(path = DESCRIPTOR_SET): Schema {
  let schema = schemas.get(path);
  if (!schema) {
    const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(path)));
    schemas.set(path, (schema = { registry, files: [...registry.files] }));
  }
  return schema;
}

/** A message of the product's API by full name (e.g. workauto.notes_tasks.v1.Note). */
export function messageDesc(typeName: string, schema = loadSchema()): DescMessage {
  const desc = schema.registry.getMessage(typeName);
  if (!desc) throw new Error(`${typeName} is not a message of the descriptor set`);
  return desc;
}

/**
 * The descriptor of a ts-proto enum object (`MemberRole`): the enum of the set with exactly its
 * value names and numbers (ts-proto's UNRECOGNIZED aside). Two enums that match are the same enum
 * to any mapping (same names, same numbers), so the first is as good as any.
 */
export function enumDesc(protoEnum: Record<string, string | number>, schema = loadSchema()): DescEnum {
  const values = Object.entries(protoEnum).filter(
    (e): e is [string, number] => typeof e[1] === 'number' && e[0] !== 'UNRECOGNIZED',
  );
  for (const type of schema.registry) {
    if (type.kind !== 'enum' || type.values.length !== values.length) continue;
    if (values.every(([name, number]) => type.value[number]?.name === name)) return type;
  }
  throw new Error(
    `no enum of the descriptor set has the values ${values.map(([name]) => name).join(', ')}: rebuild the protos (make proto)`,
  );
}

/**
 * Imports the generated ts-proto module of each file (its codecs register by full name), so
 * `messageType` finds them; a service's own modules are imported by its code already.
 */
export async function loadCodecs(files: DescFile[]): Promise<void> {
  // DescFile.name is the file's name without .proto, as ts-proto names its modules.
  await Promise.all(files.map((f) => import(new URL(`./gen/${f.name}.js`, import.meta.url).href)));
}

/** A message type: its descriptor (fields, options, comments) and its ts-proto codec. */
export interface MessageType {
  readonly desc: DescMessage;
  /** Bytes of a ts-proto object; fields left out take their defaults. */
  encode(message: Record<string, unknown>): Uint8Array;
  /** The ts-proto object of the bytes: what the service's handler returned. */
  decode(bytes: Uint8Array): Record<string, unknown>;
}

const types = new WeakMap<DescMessage, MessageType>();

/** The message type of a descriptor; its module must have been imported (loadCodecs). */
export function messageType(desc: DescMessage): MessageType {
  let type = types.get(desc);
  if (!type) {
    const codec = messageTypeRegistry.get(desc.typeName); // any message of the set
    if (!codec) throw new Error(`no ts-proto codec for ${desc.typeName}: import its generated module (loadCodecs)`);
    type = {
      desc,
      encode: (message) => codec.encode(codec.fromPartial(message)).finish(),
      decode: (bytes) => codec.decode(deepReader(bytes)) as Record<string, unknown>, // a ts-proto message object
    };
    types.set(desc, type);
  }
  return type;
}

const extensions = new WeakMap<DescFile, Map<string, DescExtension | undefined>>();

/** An extension by full name, declared in a file or in one of the files it imports. */
function extensionIn(file: DescFile, typeName: string): DescExtension | undefined {
  let byName = extensions.get(file);
  if (!byName) extensions.set(file, (byName = new Map<string, DescExtension | undefined>()));
  if (!byName.has(typeName)) {
    const seen = new Set<DescFile>();
    const visit = (f: DescFile): DescExtension | undefined => {
      if (seen.has(f)) return undefined;
      seen.add(f);
      return f.extensions.find((e) => e.typeName === typeName) ?? f.dependencies.map(visit).find(Boolean);
    };
    byName.set(typeName, visit(file));
  }
  return byName.get(typeName);
}

/**
 * A custom option of an rpc or a field (e.g. google.api.http), as @bufbuild/protobuf reads it (its
 * messages name fields in lowerCamel); undefined when the element does not set it.
 */
export function optionOf<T>(element: DescMethod | DescField, extension: string): T | undefined {
  const ext = extensionIn(element.parent.file, extension);
  return ext && hasOption(element, ext) ? (getOption(element, ext) as T) : undefined;
}

/**
 * A reader for ts-proto's decode with room for 200 nested messages instead of its 100 (protobuf's
 * default). A request's JSON nests 32 levels at most, 96 messages in Struct's encoding; a response
 * can hold such a value one or two levels further down (a webhook event's payload holds the
 * resource, whose metadata holds the client's JSON). ts-proto counts the depth on the reader.
 */
function deepReader(bytes: Uint8Array): BinaryReader {
  const reader = new BinaryReader(bytes);
  (reader as unknown as { __tsProtoDecodeDepth: number }).__tsProtoDecodeDepth = -100;
  return reader;
}

type Commented = DescMessage | DescField | DescService | DescMethod;

/** The path of an element in its file's source code info (descriptor.proto's field numbers). */
function sourcePath(desc: Commented): number[] {
  switch (desc.kind) {
    case 'message':
      return desc.parent
        ? [...sourcePath(desc.parent), 3, desc.parent.proto.nestedType.indexOf(desc.proto)]
        : [4, desc.file.proto.messageType.indexOf(desc.proto)];
    case 'field':
      return [...sourcePath(desc.parent), 2, desc.parent.proto.field.indexOf(desc.proto)];
    case 'service':
      return [6, desc.file.proto.service.indexOf(desc.proto)];
    case 'rpc':
      return [...sourcePath(desc.parent), 2, desc.parent.proto.method.indexOf(desc.proto)];
  }
}

const locations = new WeakMap<DescFile, Map<string, SourceCodeInfo_Location>>();

/** The comment above an element in its .proto file, without the `//` markers; '' when there is none. */
export function commentOf(desc: Commented): string {
  const file = desc.kind === 'field' || desc.kind === 'rpc' ? desc.parent.file : desc.file;
  let byPath = locations.get(file);
  if (!byPath) {
    byPath = new Map(
      (file.proto.sourceCodeInfo?.location ?? []).map((l: SourceCodeInfo_Location) => [l.path.join('.'), l]),
    );
    locations.set(file, byPath);
  }
  const text = byPath.get(sourcePath(desc).join('.'))?.leadingComments ?? '';
  return text
    .split('\n')
    .map((line) => (line.startsWith(' ') ? line.slice(1) : line))
    .join('\n')
    .trim();
}
