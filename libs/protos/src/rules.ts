/**
 * The field rules of the protos (`buf.validate` annotations, docs/api.md §16), checked
 * with protovalidate: the gateway checks a request with them beside its shape, and the server kit
 * again before any handler runs, so a direct gRPC caller gets the same violations. Violations
 * come back as the API's field violations: the JSON path a client sent (`stages[1].name`) and a
 * text that says what to send instead.
 */
import {
  fromBinary,
  getOption,
  hasOption,
  toJson,
  type DescExtension,
  type DescField,
  type DescMessage,
} from '@bufbuild/protobuf';
import { StructSchema } from '@bufbuild/protobuf/wkt';
import { reflect, type Path, type ReflectList, type ReflectMap, type ReflectMessage } from '@bufbuild/protobuf/reflect';
import type { Violation as RuleViolation, Validator } from '@bufbuild/protovalidate';
import { enumNames, type Violation } from './json-mapping.js';
import { loadSchema } from './schema.js';

let validator: Validator | undefined;

/**
 * Loads protovalidate (and its CEL runtime) and makes the process's one validator, which plans
 * (compiles) each message type once, on first use. Called before serving (the gateway's routes,
 * the server kit's listen): loaded on demand, it keeps a process's start-up, and its first log
 * lines, as quick as before.
 */
export async function loadRules(): Promise<void> {
  if (validator) return;
  const { createValidator } = await import('@bufbuild/protovalidate');
  // The product's registry holds the predefined rules of workauto/api/v1/rules.proto.
  validator ??= createValidator({ registry: loadSchema().registry, regexMatch: matches });
}

function theValidator(): Validator {
  if (!validator) throw new Error('the field rules are not loaded: await loadRules() before serving');
  return validator;
}

/** protovalidate's options and FieldRules, from the descriptor set (which holds buf/validate/validate.proto). */
let ruleTypes:
  { field: DescExtension; message: DescExtension; oneof: DescExtension; fieldRules: DescMessage } | undefined;
function rulesOptions() {
  if (!ruleTypes) {
    const registry = loadSchema().registry;
    const ext = (name: string) => registry.getExtension(`buf.validate.${name}`)!;
    ruleTypes = {
      field: ext('field'),
      message: ext('message'),
      oneof: ext('oneof'),
      fieldRules: registry.getMessage('buf.validate.FieldRules')!,
    };
  }
  return ruleTypes;
}

const patterns = new Map<string, RegExp>();

/**
 * The rules' regular expressions, run by the platform's RegExp instead of protovalidate's RE2
 * port (several times faster): they are ours, in the protos, never a client's. Written in the
 * syntax both share, but for RE2's `\x{a0}`, which is JavaScript's `\u{a0}`.
 */
function matches(pattern: string, text: string): boolean {
  let re = patterns.get(pattern);
  if (!re) patterns.set(pattern, (re = new RegExp(pattern.replace(/\\x\{([0-9a-fA-F]+)\}/g, '\\u{$1}'), 'u')));
  return re.test(text);
}

/** `(workauto.api.v1.max_json_bytes)`: the JSON size bound of a Struct field (rules.proto). */
let maxJsonBytes: DescExtension | undefined;
function jsonBytesOption(): DescExtension {
  return (maxJsonBytes ??= loadSchema().registry.getExtension('workauto.api.v1.max_json_bytes')!);
}

function jsonLimit(field: DescField): number | undefined {
  const ext = jsonBytesOption();
  return field.message?.typeName === 'google.protobuf.Struct' && hasOption(field, ext)
    ? (getOption(field, ext) as number)
    : undefined;
}

const withRules = new WeakMap<DescMessage, boolean>();

/** Whether a message, or one it carries, has any rule: a request without any is not decoded again. */
export function hasRules(desc: DescMessage, seen = new Set<DescMessage>()): boolean {
  const known = withRules.get(desc);
  if (known !== undefined) return known;
  if (seen.has(desc) || desc.typeName.startsWith('google.')) return false;
  seen.add(desc);
  const found =
    hasOption(desc, rulesOptions().message) ||
    desc.oneofs.some((o) => hasOption(o, rulesOptions().oneof)) ||
    desc.fields.some(
      (f) =>
        hasOption(f, rulesOptions().field) ||
        jsonLimit(f) !== undefined ||
        (f.message !== undefined && hasRules(f.message, seen)),
    );
  withRules.set(desc, found);
  return found;
}

/**
 * Every field of a request's bytes that breaks a rule, with the first rule it breaks. Throws for
 * a rule that cannot be evaluated: that is the schema's mistake, not the client's.
 */
export function ruleViolations(desc: DescMessage, bytes: Uint8Array): Violation[] {
  if (!hasRules(desc)) return [];
  const message = fromBinary(desc, bytes);
  const result = theValidator().validate(desc, message);
  if (result.kind === 'error')
    throw new Error(`the rules of ${desc.typeName} cannot be evaluated: ${result.error.message}`);
  // Nearly every request breaks no rule and has no JSON size limit: no reflection to make for it.
  if (!result.violations?.length && !jsonLimitsOf(desc)) return [];
  const root = reflect(desc, message);
  // One reason per field: the first rule it breaks (a blank name is not also "too short").
  const byField = new Map<string, string>();
  for (const v of result.violations ?? []) {
    const field = jsonPath(v.field);
    if (!byField.has(field)) byField.set(field, describe(v, root));
  }
  jsonSizeViolations(root, '', byField);
  return [...byField].map(([field, description]) => ({ field, description }));
}

/** Where a message's Struct fields with `max_json_bytes` are: its own, and the message fields that lead to more. */
interface JsonLimits {
  own: [DescField, number][];
  nested: DescField[];
}
const jsonLimitsByType = new WeakMap<DescMessage, JsonLimits | null>();

/** A message's JSON limits, worked out once per type; null when it carries none at any depth. */
function jsonLimitsOf(desc: DescMessage, seen = new Set<DescMessage>()): JsonLimits | null {
  const known = jsonLimitsByType.get(desc);
  if (known !== undefined) return known;
  if (seen.has(desc)) return null;
  seen.add(desc);
  const own: [DescField, number][] = [];
  const nested: DescField[] = [];
  for (const field of desc.fields) {
    const limit = jsonLimit(field);
    if (limit !== undefined) own.push([field, limit]);
    else if (field.message && field.fieldKind !== 'map' && !field.message.typeName.startsWith('google.')) {
      if (jsonLimitsOf(field.message, seen)) nested.push(field);
    }
  }
  const limits = own.length || nested.length ? { own, nested } : null;
  jsonLimitsByType.set(desc, limits);
  return limits;
}

/** Struct fields over their `max_json_bytes`, at any depth of the request. */
function jsonSizeViolations(message: ReflectMessage, path: string, out: Map<string, string>): void {
  const limits = jsonLimitsOf(message.desc);
  if (!limits) return;
  const at = (field: DescField) => (path ? `${path}.${field.name}` : field.name);
  for (const [field, limit] of limits.own) {
    if (!message.isSet(field)) continue;
    const value = (message.get(field) as ReflectMessage).message;
    const bytes = Buffer.byteLength(JSON.stringify(toJson(StructSchema, value as never)));
    if (bytes > limit && !out.has(at(field))) out.set(at(field), `must be at most ${limit} bytes of JSON`);
  }
  for (const field of limits.nested) {
    if (!message.isSet(field)) continue;
    if (field.fieldKind === 'list') {
      const list = message.get(field);
      for (let i = 0; i < list.size; i++) jsonSizeViolations(list.get(i) as ReflectMessage, `${at(field)}[${i}]`, out);
    } else jsonSizeViolations(message.get(field) as ReflectMessage, at(field), out);
  }
}

/** A protovalidate path as the API's JSON path: `stages[1].name`, `metadata.key`. */
function jsonPath(path: Path): string {
  let out = '';
  for (const item of path) {
    if (item.kind === 'list_sub') out += `[${item.index}]`;
    else if (item.kind === 'map_sub') out += `.${String(item.key)}`;
    else if (item.kind === 'field') out += out ? `.${item.name}` : item.name;
  }
  return out || '(body)';
}

/** The value at a path of a message (a field, a list item, a map value, an extension's value). */
function valueAt(root: ReflectMessage, path: Path): unknown {
  let at: unknown = root;
  for (const item of path) {
    if (at === undefined) return undefined;
    switch (item.kind) {
      case 'field':
        at = (at as ReflectMessage).get(item);
        break;
      case 'list_sub':
        at = (at as ReflectList).get(item.index);
        break;
      case 'map_sub':
        at = (at as ReflectMap).get(item.key);
        break;
      default:
        return undefined; // an extension (our predefined rules word their own texts) or a oneof
    }
  }
  return at;
}

/** A field's `(buf.validate.field)` rules (FieldRules), as a reflected message; undefined without any. */
export function fieldRules(field: DescField): ReflectMessage | undefined {
  const { field: option, fieldRules } = rulesOptions();
  return hasOption(field, option) ? reflect(fieldRules, getOption(field, option) as never) : undefined;
}

/** The field a violation is about (the last field of its path), whose FieldRules its rule path starts at. */
function lastField(path: Path): DescField | undefined {
  for (let i = path.length - 1; i >= 0; i--) {
    const item = path[i]!;
    if (item.kind === 'field') return item;
  }
  return undefined;
}

const NUMBER_BOUNDS = ['gt', 'gte', 'lt', 'lte'] as const;

/** "must be from 0 to 1000000", "must be at least 1", … from a numeric rules message (Int32Rules, DoubleRules, …). */
function rangeText(rules: ReflectMessage): string | undefined {
  const bound = (name: string) => {
    const f = rules.fields.find((x) => x.name === name);
    return f && rules.isSet(f) ? String(rules.get(f)) : undefined;
  };
  const [gt, gte, lt, lte] = NUMBER_BOUNDS.map(bound);
  if (gte !== undefined && lte !== undefined) return `must be from ${gte} to ${lte}`;
  const parts = [
    gte !== undefined && `at least ${gte}`,
    gt !== undefined && `greater than ${gt}`,
    lte !== undefined && `at most ${lte}`,
    lt !== undefined && `less than ${lt}`,
  ].filter(Boolean);
  return parts.length ? `must be ${parts.join(' and ')}` : undefined;
}

/**
 * The text of one violation. Our own rules (predefined in workauto/api/v1/rules.proto, CEL on a
 * field) word theirs; protovalidate's standard rules are worded here as the API words the rest of
 * its 400s ("must be at most 500 characters"), with the enum's names and the value sent where
 * they help.
 */
function describe(v: RuleViolation, root: ReflectMessage): string {
  const field = lastField(v.field);
  const rules = field && fieldRules(field);
  const ruleValue = () => (rules ? valueAt(rules, v.rule) : undefined);
  const parentRules = () => (rules ? (valueAt(rules, v.rule.slice(0, -1)) as ReflectMessage | undefined) : undefined);
  const names = () => (field?.enum ? enumNames(field.enum).join(', ') : '');
  const [kind, rule] = v.ruleId.split('.', 2) as [string, string | undefined];
  switch (rule === undefined ? kind : rule) {
    case 'required':
      return field?.enum ? `is required: one of ${names()}` : 'is required';
    case 'defined_only':
      return `must be one of ${names()}`;
    case 'not_in':
      if (kind === 'enum') return `is required: one of ${names()}`;
      break;
    case 'max_len':
      return `must be at most ${String(ruleValue())} characters`;
    case 'min_len':
      return String(ruleValue()) === '1' ? 'must not be empty' : `must be at least ${String(ruleValue())} characters`;
    case 'len':
      return `must be exactly ${String(ruleValue())} characters`;
    case 'max_bytes':
      return `must be at most ${String(ruleValue())} bytes (UTF-8)`;
    case 'uuid':
      return `must be a UUID, got ${JSON.stringify(String(valueAt(root, v.field) ?? '').slice(0, 64))}`;
    case 'uuid_empty':
      return 'is required (a UUID)';
    case 'email':
    case 'email_empty':
      return 'must be an email address like name@example.com';
    case 'pattern':
      return `must match the pattern ${String(ruleValue())}`;
    case 'min_items':
      return `must have at least ${String(ruleValue())} items`;
    case 'max_items':
      return `must have at most ${String(ruleValue())} items`;
    case 'unique':
      return 'must not list the same item twice';
    case 'min_pairs':
      return `must have at least ${String(ruleValue())} entries`;
    case 'max_pairs':
      return `must have at most ${String(ruleValue())} entries`;
    default:
      if (/^(gt|gte|lt|lte)(_|$)/.test(rule ?? '') && kind !== 'timestamp' && kind !== 'duration') {
        const parent = parentRules();
        const text = parent && rangeText(parent);
        if (text) return text;
      }
  }
  // Our own rules' texts, and protovalidate's for a rule the API does not use yet ("value must be …").
  return v.message.replace(/^value (length )?/, '');
}
