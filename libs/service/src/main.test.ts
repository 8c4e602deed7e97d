/** runProcess as a real process: what a crash-looping pod logs, and a SIGTERM while it starts. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { eventually } from '@workauto/retry/testing';

const MAIN = new URL('./main.js', import.meta.url).href;

/** A process whose start waits forever (a database that never answers), saying on stderr when it began. */
const fixture = `
  import { runProcess } from ${JSON.stringify(MAIN)};
  import { z } from '@workauto/config';
  const start = () => (process.stderr.write('start began\\n'), new Promise(() => void setInterval(() => {}, 1_000)));
  await runProcess({ name: 'fixture', env: { FIXTURE_URL: z.string().url() }, start });
`;

function start(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', fixture], {
    env: { PATH: process.env.PATH ?? '', ...env },
    cwd: new URL('..', import.meta.url),
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, output: () => ({ stdout, stderr }) };
}

describe('runProcess', () => {
  it('logs an invalid configuration as one JSON line (level fatal, naming the variable) and exits 1', async () => {
    const p = start({ FIXTURE_URL: 'not a url' });
    assert.equal(await p.exited, 1);
    const { stdout, stderr } = p.output();
    assert.equal(stderr, '');
    const lines = stdout.trim().split('\n');
    assert.equal(lines.length, 1, stdout);
    const line = JSON.parse(lines[0]!);
    assert.equal(line.level, 'fatal');
    assert.equal(line.service, 'fixture');
    assert.match(line.msg, /FIXTURE_URL/);
  });

  it('exits 0 on SIGTERM while the start is still waiting, saying so', async () => {
    const p = start({ FIXTURE_URL: 'postgres://db/x' });
    await eventually('the start began', () => p.output().stderr.includes('start began'));
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 0);
    assert.match(p.output().stdout, /stopped by a signal before the start completed/);
  });
});
