/**
 * The client packages as someone outside this repository gets them (docs/api.md §15):
 * - `@workauto/client`: `npm pack`ed, installed into an empty project, type-checked there against
 *   its own .d.ts files and used against a running stack;
 * - `workauto-client` (Python): generated from the document the gateway serves by
 *   openapi-python-client, built as a wheel and installed into a virtualenv under .cache/
 *   (scripts/openapi-clients.mjs venv), and a user's workflow run with it (deploy/embedded/python/workflow.py).
 * Skipped without python3, as the feed tests' Python parser is.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { startTestStack, type TenantFixture, type TestStack } from './harness.js';
import { hasPython } from './python-icalendar.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const WORKFLOW = fileURLToPath(new URL('../../python/workflow.py', import.meta.url));

const execFileAsync = promisify(execFile);

/**
 * A command's stdout; it fails with its output. Never spawnSync: the stack runs in this process, and
 * a blocked event loop would leave the command's requests unanswered.
 */
async function run(command: string, args: string[], options: { cwd?: string } = {}): Promise<string> {
  try {
    return (await execFileAsync(command, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options })).stdout;
  } catch (err) {
    const e = err as { code?: unknown; stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(' ')} failed (${String(e.code)}):\n${e.stdout ?? ''}\n${e.stderr ?? ''}`, {
      cause: err,
    });
  }
}

const packageJson = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;

/** What a project using the package writes: typed calls, pages(), ApiError. */
const CONSUMER = `
import { ApiError, createClient, pages, unwrap, type Schemas } from '@workauto/client';

export async function run(baseUrl: string, apiKey: string): Promise<Record<string, unknown>> {
  const api = createClient({ baseUrl, apiKey });
  const note: Schemas['Note'] = await unwrap(api.POST('/api/v1/notes', { body: { title: 'From the package' } }));
  const titles: string[] = [];
  for await (const n of pages((cursor) => api.GET('/api/v1/notes', { params: { query: { cursor, limit: 1 } } })))
    titles.push(n.title);
  let reason: string | undefined;
  try {
    await unwrap(api.GET('/api/v1/notes/{id}', { params: { path: { id: '00000000-0000-4000-8000-000000000000' } } }));
  } catch (err) {
    if (err instanceof ApiError) reason = err.reason;
  }
  return { id: note.id, titles, reason };
}
`;

describe('client packages, installed and used as their users would', () => {
  let stack: TestStack;
  let tenant: TenantFixture;
  const temp = mkdtempSync(join(tmpdir(), 'workauto-clients-'));

  before(async () => {
    // The in-process event transport: nothing here reads events, and the stack starts sooner.
    stack = await startTestStack({ kafkaBrokers: undefined });
    tenant = await stack.createTenant('Packages');
  });
  after(async () => {
    await stack?.stop();
    rmSync(temp, { recursive: true, force: true });
  });

  it('says Apache-2.0 and the product version everywhere: LICENSE, every package.json, the chart, the document', async () => {
    assert.match(readFileSync(join(ROOT, 'LICENSE'), 'utf8'), /Apache License\s+Version 2\.0, January 2004/);
    const manifests = ['package.json', ...workspaceManifests()];
    assert.ok(manifests.length > 20, manifests.join(', '));
    assert.deepEqual(
      manifests.filter((m) => packageJson(join(ROOT, m)).license !== 'Apache-2.0'),
      [],
      'every package.json says Apache-2.0',
    );
    const chart = readFileSync(join(ROOT, 'charts/workauto/Chart.yaml'), 'utf8');
    assert.match(chart, /^ {2}artifacthub\.io\/license: Apache-2\.0$/m);
    assert.equal(/^appVersion: "(.*)"$/m.exec(chart)?.[1], packageJson(join(ROOT, 'package.json')).version);
    const doc = await stack.api('GET', '/api/v1/openapi.json');
    assert.deepEqual(doc.body.info.license, { name: 'Apache-2.0', identifier: 'Apache-2.0' });
  });

  it('packs @workauto/client with its types, version and license; an empty project installs, type-checks and uses it', async () => {
    const product = packageJson(join(ROOT, 'package.json'));
    const manifest = packageJson(join(ROOT, 'libs/client/package.json'));
    assert.equal(manifest.version, product.version, "the client's version is the product's");
    assert.equal(manifest.license, 'Apache-2.0');
    assert.equal(manifest.private, undefined, 'publishable');

    const [packed] = JSON.parse(
      await run('npm', ['pack', '--json', '--pack-destination', temp], { cwd: join(ROOT, 'libs/client') }),
    ) as { filename: string; files: { path: string }[] }[];
    const files = packed!.files.map((f) => f.path).sort();
    for (const f of [
      'LICENSE',
      'README.md',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/gen/openapi.d.ts',
      'package.json',
    ])
      assert.ok(files.includes(f), `${f} is in the package: ${files.join(', ')}`);
    assert.deepEqual(
      files.filter((f) => f.startsWith('src/') || f.endsWith('.map') || f.includes('test')),
      [],
      'no sources, maps or tests',
    );

    const project = join(temp, 'consumer');
    mkdirSync(join(project, 'src'), { recursive: true });
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', join(temp, packed!.filename)], {
      cwd: project,
    });
    writeFileSync(join(project, 'src/consumer.ts'), CONSUMER);
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'es2022',
          module: 'nodenext',
          lib: ['es2022', 'dom', 'dom.asynciterable'],
          strict: true,
          outDir: 'dist',
          // The package's own .d.ts files are checked too.
          skipLibCheck: false,
        },
        include: ['src'],
      }),
    );
    await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', project]);

    const second = await stack.client(tenant.key).POST('/api/v1/notes', { body: { title: 'Before' } });
    assert.equal(second.response.status, 201);
    const out = JSON.parse(
      await run(process.execPath, [
        '--input-type=module',
        '-e',
        `const { run } = await import(${JSON.stringify(join(project, 'dist/consumer.js'))});` +
          `console.log(JSON.stringify(await run(${JSON.stringify(stack.url)}, ${JSON.stringify(tenant.key)})));`,
      ]),
    );
    assert.deepEqual(out.titles, ['From the package', 'Before'], 'pages() followed the cursor page by page');
    assert.equal(out.reason, 'NOTE_NOT_FOUND');
  });

  it(
    'generates workauto-client (Python) from the served document, installs its wheel and runs a workflow with it',
    { skip: !hasPython() && 'python3 is not on PATH' },
    async () => {
      const doc = await stack.api('GET', '/api/v1/openapi.json');
      const docPath = join(temp, 'openapi.json');
      writeFileSync(docPath, JSON.stringify(doc.body));
      // Generated, built as a wheel and installed into a virtualenv under .cache/ (once per document).
      const python = (await run(process.execPath, [join(ROOT, 'scripts/openapi-clients.mjs'), 'venv', docPath]))
        .trim()
        .split('\n')
        .pop()!;
      assert.match(python, /workauto-client-python\/bin\/python$/);
      const pip = await run(python, ['-m', 'pip', 'show', 'workauto-client']);
      assert.match(pip, /^Version: \d+\.\d+\.\d+$/m);
      assert.match(pip, /^License: Apache-2\.0$/m);

      const out = JSON.parse(
        (await run(python, [WORKFLOW, stack.url, tenant.key])).trim().split('\n').pop()!,
      ) as Record<string, any>;
      assert.deepEqual(out.note_tags, ['Q3', 'customer']);
      assert.deepEqual(out.subtasks, ['Draft', 'Review']);
      assert.equal(out.deal_status, 'won');
      assert.deepEqual(out.deal_history, ['Lead', 'Proposal', 'Won']);
      // 09:00 in Berlin: 08:00 UTC in winter time, 07:00 UTC from 2027-03-28 on.
      assert.deepEqual(out.occurrences, [
        '2027-03-15T08:00Z',
        '2027-03-22T08:00Z',
        '2027-03-29T07:00Z',
        '2027-04-05T07:00Z',
      ]);
      assert.match(out.feed, /^BEGIN:VCALENDAR\r\n/);
      assert.match(out.feed, /DTSTART;TZID=Europe\/Berlin:20270315T090000/);
      assert.match(out.feed, /RRULE:FREQ=WEEKLY;COUNT=4/);
      assert.equal(out.wrong_token_status, 404);
    },
  );
});

/** Each workspace's package.json, relative to the repository (the root's `workspaces` globs: `libs/*`, …). */
function workspaceManifests(): string[] {
  const globs = packageJson(join(ROOT, 'package.json')).workspaces as string[];
  return globs.flatMap((glob) =>
    glob.endsWith('/*')
      ? readdirSync(join(ROOT, glob.slice(0, -2)))
          .map((d) => `${glob.slice(0, -1)}${d}/package.json`)
          .filter((m) => existsSync(join(ROOT, m)))
      : [`${glob}/package.json`],
  );
}
