/**
 * Writes the OpenAPI document the gateway serves at /api/v1/openapi.json to a file, when it differs
 * from what the file holds (make build: the typed client is generated from it and `make
 * openapi-lint` lints it):
 * `node services/gateway/dist/write-openapi.js <file>`.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { buildOpenApi } from './openapi.js';
import { loadRoutes } from './routes.js';

const out = process.argv[2];
if (!out) {
  console.error('usage: node services/gateway/dist/write-openapi.js <file>: where to write the OpenAPI document');
  process.exit(2);
}
const text = `${JSON.stringify(buildOpenApi(await loadRoutes()), null, 2)}\n`;
// An unchanged document keeps its file's time: make generates the client's types from it only when it changed.
if (!existsSync(out) || readFileSync(out, 'utf8') !== text) writeFileSync(out, text);
