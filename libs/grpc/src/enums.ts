/**
 * Maps a ts-proto enum to the lowercase strings the domain and the database use
 * (MEMBER_ROLE_OWNER ↔ 'owner'), the same rule the gateway applies on the wire.
 */
export function enumMapping<E extends Record<string, string | number>>(protoEnum: E, prefix: string) {
  const toName = new Map<number, string>();
  const toValue = new Map<string, number>();
  for (const [key, value] of Object.entries(protoEnum)) {
    if (typeof value !== 'number' || !key.startsWith(prefix) || key.endsWith('_UNSPECIFIED')) continue;
    const name = key.slice(prefix.length).toLowerCase();
    toName.set(value, name);
    toValue.set(name, value);
  }
  return {
    /** undefined for UNSPECIFIED (not set) or an unknown number. */
    toDomain(value: number | undefined): string | undefined {
      return value === undefined ? undefined : toName.get(value);
    },
    fromDomain(name: string): E[keyof E] {
      const v = toValue.get(name);
      if (v === undefined) throw new Error(`no ${prefix}* value for ${name}`);
      return v as E[keyof E];
    },
    names: [...toValue.keys()],
  };
}
