/**
 * `GET /api/v1/docs`: the interactive API reference (Swagger UI) rendered in the browser from
 * `/api/v1/openapi.json`. Every asset comes from the gateway itself, read at start from the npm
 * package swagger-ui-dist in node_modules: no CDN, so it works offline and under the page's
 * Content-Security-Policy (`default-src 'self'`, plus inline styles and the `data:` images of
 * Swagger UI's stylesheet). `/`, `/docs` and `/reference` redirect to it. No credential needed.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Router } from 'express';

export const DOCS_PATH = '/api/v1/docs';
const ASSETS = `${DOCS_PATH}/assets`;

/**
 * The page's policy: scripts, fetches, fonts and frames only from this origin; Swagger UI sets
 * inline styles on its elements and its stylesheet draws icons as `data:` SVG images.
 */
const DOCS_CSP = [
  "default-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>workauto API reference</title>
<link rel="icon" type="image/png" href="${ASSETS}/favicon-32x32.png">
<link rel="stylesheet" href="${ASSETS}/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${ASSETS}/swagger-ui-bundle.js"></script>
<script src="${ASSETS}/init.js"></script>
</body>
</html>
`;

/**
 * Swagger UI's start, as a file of its own (the CSP allows no inline script). No validator badge
 * (it would call validator.swagger.io), try-it requests go to this origin (the document's server
 * `/`), the key typed into "Authorize" is kept only for the tab's life.
 */
const INIT = `window.ui = SwaggerUIBundle({
  url: '/api/v1/openapi.json',
  dom_id: '#swagger-ui',
  presets: [SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
  deepLinking: true,
  docExpansion: 'list',
  defaultModelsExpandDepth: 0,
  displayRequestDuration: true,
  filter: true,
  validatorUrl: null,
  persistAuthorization: false,
  withCredentials: false,
});
`;

const TYPES: Record<string, string> = {
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui.css': 'text/css; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

/** Reads Swagger UI's files from node_modules; a missing package fails the start saying what to do. */
function loadAssets(): Map<string, { type: string; body: Buffer }> {
  let dir: string;
  try {
    dir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  } catch {
    throw new Error('the npm package swagger-ui-dist (the /api/v1/docs page) is not installed: run `npm ci`');
  }
  const assets = new Map(
    Object.entries(TYPES).map(([file, type]) => [file, { type, body: readFileSync(join(dir, file)) }]),
  );
  assets.set('init.js', { type: 'text/javascript; charset=utf-8', body: Buffer.from(INIT) });
  return assets;
}

export function docsRoutes(): Router {
  const assets = loadAssets();
  const router = Router();
  router.get(DOCS_PATH, (_req, res) => {
    res.setHeader('Content-Security-Policy', DOCS_CSP);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.setHeader('Cache-Control', 'no-cache');
    res.type('html').send(PAGE);
  });
  router.get(`${ASSETS}/:file`, (req, res, next) => {
    const asset = assets.get(req.params.file);
    if (!asset) return next();
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Cache-Control', 'public, max-age=3600');
    res.type(asset.type).send(asset.body);
  });
  for (const alias of ['/', '/docs', '/reference']) router.get(alias, (_req, res) => res.redirect(302, DOCS_PATH));
  return router;
}
