/**
 * Test support: the fixture protos of libs/protos/test-protos/fixtures (field kinds the real protos
 * do not use yet: int64, double, oneof, maps, wrappers; and annotations the gateway must refuse),
 * compiled by buf into their own descriptor set at build time, with their ts-proto codecs loaded.
 */
import type { DescFile, DescMessage } from '@bufbuild/protobuf';
import { FIXTURES_DESCRIPTOR_SET, loadCodecs, loadSchema } from './schema.js';

export const fixtures = loadSchema(FIXTURES_DESCRIPTOR_SET);
await loadCodecs(fixtures.files);

/** The file fixtures/<name>.proto, as a one-file list for buildRoutes. */
export function fixtureFile(name: string): DescFile[] {
  const file = fixtures.files.find((f) => f.name === `fixtures/${name}`);
  if (!file) throw new Error(`no fixture ${name}`);
  return [file];
}

/** A fixture message by full name, e.g. workauto.fixture.v1.Thing. */
export function fixtureMessage(typeName: string): DescMessage {
  const desc = fixtures.registry.getMessage(typeName);
  if (!desc) throw new Error(`no fixture message ${typeName}`);
  return desc;
}
