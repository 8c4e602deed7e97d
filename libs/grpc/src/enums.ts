import { enumDesc, enumFromJson, enumNames, enumToJson, type Schema } from '@workauto/protos';

/**
 * Maps a ts-proto enum to the lowercase strings the domain and the database use
 * (MEMBER_ROLE_OWNER ↔ 'owner'): the gateway's mapping on the wire (libs/protos json-mapping.ts),
 * driven by the enum's descriptor, so a service's names and the API's cannot differ.
 */
export function enumMapping<E extends Record<string, string | number>>(protoEnum: E, schema?: Schema) {
  const desc = enumDesc(protoEnum, schema);
  return {
    /** undefined for UNSPECIFIED (not set) or an unknown number. */
    toDomain(value: number | undefined): string | undefined {
      return value === undefined ? undefined : (enumToJson(desc, value) ?? undefined);
    },
    fromDomain(name: string): E[keyof E] {
      const v = enumFromJson(desc, name);
      if (v === undefined) throw new Error(`${desc.typeName} has no value ${JSON.stringify(name)}`);
      return v as E[keyof E];
    },
    names: enumNames(desc),
  };
}
