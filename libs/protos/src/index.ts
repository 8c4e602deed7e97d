export * from './json-mapping.js';
export * from './schema.js';
export { resourceJson, type ResourceJson, type MessageCodec } from './resource-json.js';
export { ruleViolations, hasRules, fieldRules, loadRules } from './rules.js';
