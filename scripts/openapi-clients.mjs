/**
 * The OpenAPI document through the generators users run (docs/api.md §15), each pinned and
 * installed once into .cache/openapi-clients: openapi-python-client (PyPI), openapi-typescript
 * (npm, this repository's own) and oapi-codegen (built from the Go module proxy). For each it
 * prints the operations generated out of the document's and the warnings, and fails on any warning,
 * on an operation left out, or on generated code that does not build (Go) or import (Python).
 *
 *   node scripts/openapi-clients.mjs check <openapi.json>   make openapi-lint
 *   node scripts/openapi-clients.mjs wheel <openapi.json>   the Python package `workauto-client` built
 *                                                           as a wheel; prints its path
 *   node scripts/openapi-clients.mjs venv <openapi.json>    that wheel installed (with httpx and attrs
 *                                                           from PyPI) into .cache/workauto-client-python;
 *                                                           prints its python (the e2e test)
 *
 * A document that passed once is not generated again (the result is kept under its hash), so an
 * unchanged checkout costs nothing. A generator whose toolchain is missing (python3, go) is skipped
 * with a line saying so.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CACHE = join(root, '.cache/openapi-clients');
const PYTHON_GENERATOR = { name: 'openapi-python-client', version: '0.29.1', setuptools: '80.9.0' };
const GO_GENERATOR = { module: 'github.com/oapi-codegen/oapi-codegen/v2', version: 'v2.8.2', runtime: 'v1.9.0' };
const PRODUCT_VERSION = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
/** The Python package's templates: setup.py with the license (libs/client/python). */
const PYTHON_TEMPLATES = join(root, 'libs/client/python/templates');

const [command, input] = process.argv.slice(2);
if (!['check', 'wheel', 'venv'].includes(command ?? '') || !input) {
  console.error('usage: node scripts/openapi-clients.mjs check|wheel|venv <openapi.json>');
  process.exit(2);
}
const text = readFileSync(input, 'utf8');
const doc = JSON.parse(text);
const operations = Object.values(doc.paths).flatMap((item) =>
  Object.entries(item)
    .filter(([method]) => ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'].includes(method))
    .map(([, op]) => op.operationId),
);
// The document's content, not its formatting: the e2e test's copy of the served document and
// make build's file share one run.
const key = createHash('sha256')
  .update(JSON.stringify(doc))
  .update(readFileSync(fileURLToPath(import.meta.url)))
  .update(templatesText())
  .digest('hex')
  .slice(0, 16);
const work = join(CACHE, 'runs', key);
mkdirSync(work, { recursive: true });

function templatesText() {
  return readdirSync(PYTHON_TEMPLATES)
    .sort()
    .map((f) => readFileSync(join(PYTHON_TEMPLATES, f), 'utf8'))
    .join('\n');
}

/** A command's exit status and output; throws only when it cannot start. */
function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options });
  if (r.error) throw r.error;
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

function must(cmd, args, what, options = {}) {
  const r = run(cmd, args, options);
  if (r.status !== 0) {
    console.error(r.out.slice(-4000));
    throw new Error(`${what} failed (${cmd} ${args.join(' ')}): the output is above`);
  }
  return r.out;
}

const has = (cmd, args) => spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;

/**
 * `fn` while holding a lock folder (mkdir is atomic): .cache/ is shared by every clone on the
 * machine (other branches' `make test`, CI), and two runs must not write one folder at once. A lock
 * older than 10 minutes is one a killed run left behind.
 */
function locked(name, fn) {
  const dir = join(CACHE, `${name}.lock`);
  mkdirSync(dirname(dir), { recursive: true });
  const giveUp = Date.now() + 10 * 60_000;
  for (;;) {
    try {
      mkdirSync(dir, { recursive: false });
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      try {
        if (Date.now() - statSync(dir).mtimeMs > 10 * 60_000) rmSync(dir, { recursive: true, force: true });
      } catch {
        // released meanwhile
      }
      if (Date.now() > giveUp)
        throw new Error(`waited 10 minutes for ${dir}: remove it if no run holds it`, { cause: err });
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The key an operation id is compared by: generators change its case and add underscores. */
const norm = (id) => id.replace(/_/g, '').toLowerCase();

function missingOf(generated) {
  const names = new Set([...generated].map(norm));
  return operations.filter((id) => !names.has(norm(id)));
}

// ---------- openapi-python-client ----------

function pythonGenerator() {
  const venv = join(CACHE, `${PYTHON_GENERATOR.name}-${PYTHON_GENERATOR.version}`);
  const ready = () => existsSync(join(venv, '.installed'));
  if (!ready())
    locked(`${PYTHON_GENERATOR.name}-${PYTHON_GENERATOR.version}`, () => ready() || installPythonGenerator(venv));
  return venv;
}

function installPythonGenerator(venv) {
  console.error(`openapi-clients: installing ${PYTHON_GENERATOR.name} ${PYTHON_GENERATOR.version} into ${venv}…`);
  if (!existsSync(join(venv, 'bin/python'))) must('python3', ['-m', 'venv', venv], 'python3 -m venv');
  must(
    join(venv, 'bin/pip'),
    [
      'install',
      '--quiet',
      `${PYTHON_GENERATOR.name}==${PYTHON_GENERATOR.version}`,
      `setuptools==${PYTHON_GENERATOR.setuptools}`,
    ],
    'pip install',
  );
  writeFileSync(join(venv, '.installed'), '');
}

/** The package generated into work/python; its warnings and the operations it has. */
function generatePython() {
  const venv = pythonGenerator();
  const out = join(work, 'python');
  const config = join(work, 'python-config.json');
  writeFileSync(
    config,
    JSON.stringify({
      project_name_override: 'workauto-client',
      package_name_override: 'workauto_client',
      package_version_override: PRODUCT_VERSION,
    }),
  );
  const r = run(join(venv, 'bin', PYTHON_GENERATOR.name), [
    'generate',
    '--path',
    resolve(input),
    '--meta',
    'setup',
    '--config',
    config,
    '--custom-template-path',
    PYTHON_TEMPLATES,
    '--output-path',
    out,
    '--overwrite',
  ]);
  if (r.status !== 0) {
    console.error(r.out.slice(-4000));
    throw new Error(`${PYTHON_GENERATOR.name} failed: the output is above`);
  }
  const warnings = r.out.split('\n').filter((l) => /^WARNING\b/.test(l));
  const api = join(out, 'workauto_client/api');
  const generated = existsSync(api)
    ? readdirSync(api).flatMap((tag) =>
        existsSync(join(api, tag)) && !tag.endsWith('.py')
          ? readdirSync(join(api, tag))
              .filter((f) => f.endsWith('.py') && f !== '__init__.py')
              .map((f) => f.slice(0, -3))
          : [],
      )
    : [];
  // The generated code imports: the models it names exist and the modules parse.
  const imports = run(join(venv, 'bin/python'), ['-c', 'import workauto_client, workauto_client.models'], {
    cwd: out,
  });
  const problems = imports.status === 0 ? [] : [`the package does not import: ${imports.out.trim().slice(-800)}`];
  return { venv, out, generated, warnings: [...warnings, ...problems], log: r.out };
}

const WHEELS = join(work, 'wheel');
const builtWheel = () => {
  const wheel = existsSync(WHEELS) ? readdirSync(WHEELS).find((f) => f.endsWith('.whl')) : undefined;
  return wheel && join(WHEELS, wheel);
};

function pythonWheel(venv, out) {
  const built = builtWheel();
  if (built) return built;
  must(
    join(venv, 'bin/pip'),
    ['wheel', '--quiet', '--no-deps', '--no-build-isolation', '--wheel-dir', WHEELS, out],
    'building the wheel',
  );
  return builtWheel();
}

// ---------- openapi-typescript ----------

function generateTypescript() {
  const out = join(work, 'typescript/openapi.d.ts');
  const cli = join(root, 'node_modules/openapi-typescript/bin/cli.js');
  const r = run(process.execPath, [cli, resolve(input), '--output', out]);
  if (r.status !== 0) {
    console.error(r.out.slice(-4000));
    throw new Error('openapi-typescript failed: the output is above');
  }
  // Its own two lines (the version, the file written) are not warnings; anything else is.
  const warnings = r.out
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/^✨ openapi-typescript \d/.test(l) && !/^🚀 .* → .* \[[\d.]+m?s\]$/.test(l));
  const body = /export interface operations \{\n([\s\S]*?)\n\}/.exec(readFileSync(out, 'utf8'))?.[1] ?? '';
  const generated = [...body.matchAll(/^ {4}"?([A-Za-z_$][\w$]*)"?: \{$/gm)].map((m) => m[1]);
  return { generated, warnings };
}

// ---------- oapi-codegen ----------

function goEnv() {
  return {
    ...process.env,
    GOBIN: join(CACHE, `oapi-codegen-${GO_GENERATOR.version}`),
    GOMODCACHE: join(CACHE, 'go/mod'),
    GOCACHE: join(CACHE, 'go/build'),
    GOFLAGS: '-mod=mod',
    GOTOOLCHAIN: 'local',
  };
}

function goGenerator() {
  const env = goEnv();
  const bin = join(env.GOBIN, 'oapi-codegen');
  if (!existsSync(bin))
    locked(`oapi-codegen-${GO_GENERATOR.version}`, () => {
      if (existsSync(bin)) return;
      console.error(`openapi-clients: building oapi-codegen ${GO_GENERATOR.version} into ${env.GOBIN}…`);
      must('go', ['install', `${GO_GENERATOR.module}/cmd/oapi-codegen@${GO_GENERATOR.version}`], 'go install', {
        env,
      });
    });
  return bin;
}

function generateGo() {
  const env = goEnv();
  const bin = goGenerator();
  const dir = join(work, 'go');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'oapi-codegen.yaml'),
    'package: workauto\ngenerate:\n  models: true\n  client: true\noutput: client.gen.go\n',
  );
  const r = run(bin, ['-config', 'oapi-codegen.yaml', resolve(input)], { cwd: dir, env });
  const warnings = r.out
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  if (r.status !== 0) return { generated: [], warnings: warnings.length ? warnings : ['oapi-codegen failed'] };
  const code = readFileSync(join(dir, 'client.gen.go'), 'utf8');
  const generated = [...code.matchAll(/^func \(c \*Client\) (\w+)\(/gm)]
    .map((m) => m[1])
    .filter((n) => !n.endsWith('WithBody'));
  // The generated client builds: every type it names exists.
  writeFileSync(
    join(dir, 'go.mod'),
    `module example.com/workauto\n\ngo 1.22\n\nrequire github.com/oapi-codegen/runtime ${GO_GENERATOR.runtime}\n`,
  );
  const tidy = run('go', ['mod', 'tidy'], { cwd: dir, env });
  const build = tidy.status === 0 ? run('go', ['build', './...'], { cwd: dir, env }) : tidy;
  if (build.status !== 0) warnings.push(`the generated client does not build: ${build.out.trim().slice(0, 1500)}`);
  return { generated, warnings };
}

// ---------- main ----------

function report(name, result) {
  const missing = missingOf(result.generated);
  const generated = operations.length - missing.length;
  console.log(`${name}: ${generated}/${operations.length} operations, ${result.warnings.length} warnings`);
  for (const w of result.warnings.slice(0, 20)) console.log(`  warning: ${w.slice(0, 500)}`);
  if (result.warnings.length > 20) console.log(`  … and ${result.warnings.length - 20} more`);
  if (missing.length) console.log(`  missing: ${missing.join(', ')}`);
  return { name, generated, warnings: result.warnings.length, ok: !missing.length && !result.warnings.length };
}

const passed = join(work, 'passed.json');

/** The Python package built for this document, generated first unless `check` did. */
function wheelOf() {
  if (builtWheel()) return builtWheel();
  if (!has('python3', ['--version'])) throw new Error('python3 is not on PATH: the Python package needs it');
  // A package `check` generated (and found clean) is built as it is.
  const checked = existsSync(passed) && existsSync(join(work, 'python/setup.py'));
  const python = checked ? { venv: pythonGenerator(), out: join(work, 'python') } : generatePython();
  if (!checked && (python.warnings.length || missingOf(python.generated).length)) {
    report('openapi-python-client', python);
    throw new Error('the Python package has the problems above: make openapi-lint shows them all');
  }
  return pythonWheel(python.venv, python.out);
}

/**
 * The wheel installed into the users' virtualenv: its dependencies from PyPI the first time, then
 * only a changed wheel again. Its python.
 */
function installed(wheel) {
  const venv = join(root, '.cache/workauto-client-python');
  const python = join(venv, 'bin/python');
  const marker = join(venv, '.workauto-client-wheel');
  const digest = createHash('sha256').update(readFileSync(wheel)).digest('hex');
  if (existsSync(marker) && readFileSync(marker, 'utf8') === digest) return python;
  return locked('workauto-client-python', () => {
    if (existsSync(marker) && readFileSync(marker, 'utf8') === digest) return python;
    if (!existsSync(python)) must('python3', ['-m', 'venv', venv], 'python3 -m venv');
    const withDeps = run(python, ['-c', 'import httpx, attrs']).status !== 0;
    must(
      join(venv, 'bin/pip'),
      [
        'install',
        '--quiet',
        '--disable-pip-version-check',
        ...(withDeps ? [] : ['--no-deps', '--force-reinstall']),
        wheel,
      ],
      'pip install',
    );
    writeFileSync(marker, digest);
    return python;
  });
}

// One run per document at a time; a second one waits, then finds the first one's results.
locked(`runs/${key}`, () => {
  if (command === 'venv') {
    console.log(installed(wheelOf()));
  } else if (command === 'wheel') {
    console.log(wheelOf());
  } else if (existsSync(passed)) {
    for (const r of JSON.parse(readFileSync(passed, 'utf8')))
      console.log(
        `${r.name}: ${r.generated}/${operations.length} operations, ${r.warnings} warnings (this document passed before)`,
      );
  } else {
    const results = [];
    if (has('python3', ['--version'])) results.push(report('openapi-python-client', generatePython()));
    else console.log('openapi-python-client: skipped, python3 is not on PATH');
    results.push(report('openapi-typescript', generateTypescript()));
    if (has('go', ['version'])) results.push(report('oapi-codegen', generateGo()));
    else console.log('oapi-codegen: skipped, go is not on PATH');
    if (results.some((r) => !r.ok)) {
      console.log(
        'openapi-clients: a generator warned or left an operation out (above); fix the document in services/gateway/src/openapi.ts',
      );
      process.exitCode = 1;
      return;
    }
    writeFileSync(passed, JSON.stringify(results));
    // Runs of other documents go after a day (another clone may be using a recent one).
    const runs = join(CACHE, 'runs');
    for (const d of readdirSync(runs))
      if (d !== key && !d.endsWith('.lock') && Date.now() - statSync(join(runs, d)).mtimeMs > 86_400_000)
        rmSync(join(runs, d), { recursive: true, force: true });
  }
});
