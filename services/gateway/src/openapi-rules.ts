/**
 * The JSON Schema keywords of a field's rules (`buf.validate` annotations, docs/api.md
 * §16) for the OpenAPI document: the constraints the gateway and the services check are
 * the ones the document states (maxLength, minimum, pattern, format, maxItems, …).
 */
import { getExtension, hasExtension, type DescField } from '@bufbuild/protobuf';
import type { ReflectMessage } from '@bufbuild/protobuf/reflect';
import { enumNames, fieldRules, loadSchema } from '@workauto/protos';

type Schema = Record<string, unknown>;

/** Keywords of the field's value (a list's items, a map's values), and of the list or map itself. */
export interface RuleKeywords {
  value: Schema;
  container: Schema;
}

const NONE: RuleKeywords = { value: {}, container: {} };
const cache = new WeakMap<DescField, RuleKeywords>();

export function ruleKeywords(field: DescField): RuleKeywords {
  let keywords = cache.get(field);
  if (!keywords) {
    const rules = fieldRules(field);
    cache.set(field, (keywords = rules ? fromRules(field, rules) : NONE));
  }
  return keywords;
}

/** The fields a rules message sets, by proto name (numbers as numbers). */
function setFields(message: ReflectMessage): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const f of message.fields) {
    if (!message.isSet(f)) continue;
    const v = message.get(f);
    out.set(f.name, typeof v === 'bigint' ? Number(v) : v);
  }
  return out;
}

/** Our predefined rules (workauto/api/v1/rules.proto) a string, int32 or timestamp rules message sets. */
function predefined(rules: ReflectMessage): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const registry = loadSchema().registry;
  for (const name of PREDEFINED) {
    const ext = registry.getExtension(`workauto.api.v1.${name}`);
    if (!ext || ext.extendee.typeName !== rules.desc.typeName) continue;
    const message = rules.message;
    if (hasExtension(message, ext)) {
      const v: unknown = getExtension(message, ext);
      out.set(name, typeof v === 'bigint' ? Number(v) : v);
    }
  }
  return out;
}
const PREDEFINED = [
  'date',
  'date_in_years',
  'not_blank',
  'http_url',
  'trimmed_http_url',
  'trimmed_max_len',
  'uuid_or_empty',
  'in_years',
  'page_size',
  'currency',
  'email_address',
  'max_decimals',
];

/** Keywords of one value's rules (StringRules, Int32Rules, EnumRules, …: the `type` oneof of FieldRules). */
function valueKeywords(field: DescField, rules: ReflectMessage | undefined): Schema {
  const oneof = rules?.desc.oneofs.find((o) => o.name === 'type');
  const set = oneof && rules!.oneofCase(oneof);
  if (!set) return {};
  const kind = set.name;
  const typed = rules!.get(set) as ReflectMessage;
  const r = setFields(typed);
  const own = predefined(typed);
  const s: Schema = {};
  if (kind === 'string') {
    if (r.has('min_len')) s.minLength = r.get('min_len');
    if (r.has('max_len')) s.maxLength = r.get('max_len');
    if (own.has('trimmed_max_len')) s.maxLength = own.get('trimmed_max_len');
    if (r.has('len')) s.minLength = s.maxLength = r.get('len');
    if (r.has('pattern')) s.pattern = r.get('pattern');
    if (own.get('not_blank')) {
      s.minLength = Math.max(Number(s.minLength ?? 0), 1);
      s.pattern = '\\S';
    }
    if (r.get('uuid') || own.get('uuid_or_empty')) s.format = 'uuid';
    if (r.get('email') || own.get('email_address')) s.format = 'email';
    if (r.get('uri') || own.get('http_url') || own.get('trimmed_http_url')) s.format = 'uri';
    if (own.get('date')) s.format = 'date';
    if (own.get('currency')) s.pattern = '^\\s*[A-Za-z]{3}\\s*$';
  } else if (kind === 'enum') {
    const allowed = (r.get('in') as { values?: unknown[] } | undefined)?.values;
    if (field.enum && allowed?.length) {
      const names = enumNames(field.enum);
      s.enum = names.filter((_, i) => allowed.includes(field.enum.values.filter((v) => v.number !== 0)[i]!.number));
    }
  } else if (kind !== 'timestamp' && kind !== 'duration' && kind !== 'bool' && kind !== 'bytes') {
    // Numbers: int32, int64, double, …
    if (r.has('gte')) s.minimum = r.get('gte');
    if (r.has('gt')) s.exclusiveMinimum = r.get('gt');
    if (r.has('lte')) s.maximum = r.get('lte');
    if (r.has('lt')) s.exclusiveMaximum = r.get('lt');
    if (own.get('page_size')) s.minimum = 1;
  }
  return s;
}

/**
 * A field's own CEL rule that is one regular expression (`this.matches('^[a-z0-9]…$')`, with a
 * text of its own for the 400) is the schema's `pattern`.
 */
function celPattern(rules: ReflectMessage): string | undefined {
  const cel = rules.fields.find((f) => f.name === 'cel');
  const list = cel && (rules.get(cel) as { size: number; get(i: number): unknown });
  for (let i = 0; list && i < list.size; i++) {
    const expression = String(setFields(list.get(i) as ReflectMessage).get('expression') ?? '');
    const m = /^this\.matches\('((?:[^'\\]|\\.)*)'\)$/.exec(expression);
    if (m) return m[1]!.replace(/\\\\/g, '\\');
  }
  return undefined;
}

function fromRules(field: DescField, rules: ReflectMessage): RuleKeywords {
  const typeOneof = rules.desc.oneofs.find((o) => o.name === 'type')!;
  const set = rules.oneofCase(typeOneof);
  if (set?.name === 'repeated') {
    const repeated = rules.get(set) as ReflectMessage;
    const r = setFields(repeated);
    const container: Schema = {};
    if (r.has('min_items')) container.minItems = r.get('min_items');
    if (r.has('max_items')) container.maxItems = r.get('max_items');
    if (r.get('unique')) container.uniqueItems = true;
    const items = repeated.fields.find((f) => f.name === 'items')!;
    return {
      value: repeated.isSet(items) ? valueKeywords(field, repeated.get(items) as ReflectMessage) : {},
      container,
    };
  }
  if (set?.name === 'map') {
    const map = rules.get(set) as ReflectMessage;
    const r = setFields(map);
    const container: Schema = {};
    if (r.has('min_pairs')) container.minProperties = r.get('min_pairs');
    if (r.has('max_pairs')) container.maxProperties = r.get('max_pairs');
    const values = map.fields.find((f) => f.name === 'values')!;
    return { value: map.isSet(values) ? valueKeywords(field, map.get(values) as ReflectMessage) : {}, container };
  }
  const pattern = celPattern(rules);
  return { value: { ...valueKeywords(field, rules), ...(pattern ? { pattern } : {}) }, container: {} };
}
