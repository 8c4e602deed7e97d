/**
 * Writes the OpenAPI document the gateway serves at /api/v1/openapi.json to a file (make build:
 * the typed client is generated from it and `make openapi-lint` lints it):
 * `node services/gateway/dist/write-openapi.js <file>`.
 */
import { writeFileSync } from 'node:fs';
import { buildOpenApi } from './openapi.js';
import { loadRoutes } from './routes.js';

const out = process.argv[2];
if (!out) {
  console.error('usage: node services/gateway/dist/write-openapi.js <file>: where to write the OpenAPI document');
  process.exit(2);
}
writeFileSync(out, `${JSON.stringify(buildOpenApi(await loadRoutes()), null, 2)}\n`);
