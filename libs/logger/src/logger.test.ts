import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { context, trace, TraceFlags } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { eventually } from '@workauto/retry/testing';
import { createLogger, tapLogs } from './index.js';

describe('logger', () => {
  it('takes its level from LOG_LEVEL when given none, and names LOG_LEVEL and the levels when it is bad', () => {
    const saved = process.env.LOG_LEVEL;
    try {
      process.env.LOG_LEVEL = 'warn';
      assert.equal(createLogger('test').level, 'warn');
      process.env.LOG_LEVEL = 'loud';
      assert.throws(() => createLogger('test'), /LOG_LEVEL: .*"fatal".*"silent".* \(got "loud"\)/);
      assert.equal(createLogger('test', 'debug').level, 'debug', 'a level given wins over the environment');
    } finally {
      if (saved === undefined) delete process.env.LOG_LEVEL;
      else process.env.LOG_LEVEL = saved;
    }
  });

  it('redacts secrets at the top level and nested, and writes JSON lines', () => {
    const lines: string[] = [];
    const stop = tapLogs((l) => lines.push(l));
    const log = createLogger('test', 'info');
    log.info(
      {
        api_key: 'wk_SECRET1',
        req: { headers: { authorization: 'Bearer wk_SECRET2' } },
        body: { credential: 'SECRET3', nested: { token: 'SECRET4' } },
      },
      'hello',
    );
    stop();
    const text = lines.join('');
    for (const s of ['SECRET1', 'SECRET2', 'SECRET3', 'SECRET4']) assert.equal(text.includes(s), false, `${s} leaked`);
    const entry = JSON.parse(lines[0]!);
    assert.equal(entry.msg, 'hello');
    assert.equal(entry.level, 'info');
    assert.equal(entry.api_key, '[redacted]');
  });

  it('censors secrets inside arrays, errors and child bindings three levels down, and leaves the logged object as it was', async () => {
    const lines: string[] = [];
    const stop = tapLogs((l) => lines.push(l));
    const log = createLogger('test', 'info');
    const fields = {
      items: [{ token: 'SECRET1' }, { name: 'kept' }],
      err: Object.assign(new Error('upstream refused'), { config: { headers: { authorization: 'Bearer SECRET2' } } }),
      a: { b: { c: { password: 'SECRET3' } } },
    };
    log.error(fields, 'failed');
    log.child({ cookie: 'SECRET4', scope: 'kept' }).info('child');
    const inner = Object.assign(new Error('one of them'), { token: 'SECRET5' });
    log.error({ err: new AggregateError([inner], 'all failed') }, 'failed');
    await eventually('the three lines are written', () => lines.length >= 3, 20_000, 10);
    stop();
    const text = lines.join('');
    for (const s of ['SECRET1', 'SECRET2', 'SECRET3', 'SECRET4', 'SECRET5'])
      assert.equal(text.includes(s), false, `${s} leaked`);
    const [failed, child, aggregate] = lines.map((l) => JSON.parse(l));
    assert.deepEqual(failed.items, [{ token: '[redacted]' }, { name: 'kept' }]);
    assert.equal(failed.err.message, 'upstream refused', 'the error is still written as an error');
    assert.equal(failed.err.type, 'Error');
    assert.match(failed.err.stack, /^Error: upstream refused\n\s+at /, 'with its stack');
    assert.equal(failed.err.config.headers.authorization, '[redacted]');
    assert.equal(child.scope, 'kept');
    assert.equal(aggregate.err.aggregateErrors[0].token, '[redacted]', "an AggregateError's errors are written too");
    assert.equal(fields.items[0]!.token, 'SECRET1', "the caller's object is not changed");
    assert.equal(fields.err.config.headers.authorization, 'Bearer SECRET2');
  });

  it('keeps error codes (SQLSTATEs, gRPC statuses) and redacts only secret codes', async () => {
    const lines: string[] = [];
    const stop = tapLogs((l) => lines.push(l));
    const log = createLogger('test', 'info');
    log.error(
      { err: Object.assign(new Error('deadlock detected'), { code: '40P01' }), grpc: { code: 10 } },
      'rpc failed',
    );
    log.info(
      {
        req: { body: { code: 'INVITE1' }, query: { code: 'OAUTH2' } },
        invitation: { code: 'INVITE3' },
        request: { code: 'INVITE4' },
      },
      'claim',
    );
    // The sink passes a line on once the previous one is written.
    await eventually('both lines are written', () => lines.length >= 2, 20_000, 10);
    stop();
    const [failed, claim] = lines.map((l) => JSON.parse(l));
    assert.equal(failed.err.code, '40P01');
    assert.equal(failed.grpc.code, 10);
    for (const s of ['INVITE1', 'OAUTH2', 'INVITE3', 'INVITE4'])
      assert.equal(lines.join('').includes(s), false, `${s} leaked`);
    assert.equal(claim.req.query.code, '[redacted]');
  });

  it('writes the active trace and span ids on every line inside a traced call, none outside', async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const lines: string[] = [];
    const untap = tapLogs((line) => lines.push(line));
    const logger = createLogger('trace-test', 'info');
    const span = trace.wrapSpanContext({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      traceFlags: TraceFlags.SAMPLED,
    });
    await context.with(trace.setSpan(context.active(), span), async () => {
      await new Promise((r) => setTimeout(r, 1));
      logger.info('inside');
    });
    logger.info('outside');
    await eventually('both lines are written', () => lines.length >= 2, 20_000, 10);
    untap();
    context.disable();
    const [inside, outside] = lines.map((l) => JSON.parse(l));
    assert.equal(inside.trace_id, '4bf92f3577b34da6a3ce929d0e0e4736');
    assert.equal(inside.span_id, '00f067aa0ba902b7');
    assert.equal(inside.trace_flags, '01');
    assert.equal(outside.trace_id, undefined);
  });

  it('exits only once every line logged so far is written: a fatal line right after a warning is not lost', async () => {
    // process.exit() alone lost such a line every time: the sink held it behind the warning's write.
    const script = [
      `import { createLogger, exitAfterLogs } from ${JSON.stringify(new URL('./index.js', import.meta.url).href)};`,
      `const logger = createLogger('fixture', 'warn');`,
      `logger.warn('waiting for the event broker');`,
      `logger.fatal('fixture did not start');`,
      `await exitAfterLogs(3);`,
    ].join('\n');
    const run = promisify(execFile);
    const exited = await run(process.execPath, ['--input-type=module', '-e', script]).then(
      () => assert.fail('exit code 0'),
      (err: { code: number; stdout: string }) => err,
    );
    assert.equal(exited.code, 3);
    const msgs = exited.stdout
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { msg: string }).msg);
    assert.deepEqual(msgs, ['waiting for the event broker', 'fixture did not start']);
  });
});
