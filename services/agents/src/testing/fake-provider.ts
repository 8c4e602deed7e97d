/**
 * A fake LLM provider on loopback for tests and the benchmark: a real HTTP server speaking the wire
 * formats the official SDKs call — OpenAI (`GET /v1/models`, `POST /v1/chat/completions`) and
 * Anthropic (`GET /v1/models`, `POST /v1/messages`, told apart by the `anthropic-version` header) —
 * with each key's behaviour set by the test: a probe outcome, and for chat a script of steps
 * (answer, tool calls, an error, a hang).
 *
 * In the test's process (FakeProvider.start), or as a process of its own on its own port
 * (FakeProviderProcess.start: a tenant's OpenAI- or Anthropic-compatible server), scripted over
 * its control routes (`/_fake/…`).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { spawnServerProcess, type ServerProcess } from '@workauto/testing';
import type { ProviderSettings } from '../providers/index.js';

/** What GET /v1/models answers for a key. */
export type ProbeOutcome = 'ok' | 401 | 402 | 403 | 'quota' | 429 | 500 | 529 | 'hang';

/** One chat answer of a script. */
export type ChatStep =
  | { text: string; usage?: { input: number; output: number }; delayMs?: number }
  | {
      tools: { name: string; arguments: Record<string, unknown> }[];
      text?: string;
      usage?: { input: number; output: number };
      delayMs?: number;
    }
  | { error: Exclude<ProbeOutcome, 'ok' | 'hang'> }
  | { hang: true }
  /** In the test's process only: answers `then` once `gate` settles (a test holds the run at that call). */
  | { gate: Promise<unknown>; then: ChatStep };

/**
 * A script of many conversations at once, as JSON (a fake in its own process takes it too): each
 * chat answers `untilToolResult` while its conversation carries no tool result yet, then
 * `afterToolResult` (a tool call, then the final answer, whichever run the chat belongs to).
 */
export interface ToolLoopScript {
  untilToolResult: ChatStep;
  afterToolResult: ChatStep;
}

/** What a key's chats answer: steps in order, a tool loop, or (in the test's process) a function of each request. */
export type ChatScript = ChatStep[] | ToolLoopScript | ((body: ChatBody) => ChatStep);

/** A chat request's body as either provider receives it (the fields a script looks at). */
export interface ChatBody {
  model: string;
  messages: { role: string; content?: unknown }[];
}

/** Whether a chat request already carries a tool's result (OpenAI: a tool message; Anthropic: a tool_result block). */
export function hasToolResult(body: ChatBody): boolean {
  return body.messages.some(
    (m) =>
      m.role === 'tool' ||
      (Array.isArray(m.content) && m.content.some((c: { type?: string }) => c.type === 'tool_result')),
  );
}

/** The step a chat answers: the next of a list (consumed), or chosen by the request's body. */
function nextStep(script: ChatScript | undefined, body: string): ChatStep | undefined {
  if (!script) return undefined;
  if (Array.isArray(script)) return script.shift();
  if (typeof script === 'function') return script(JSON.parse(body) as ChatBody);
  return hasToolResult(JSON.parse(body) as ChatBody) ? script.afterToolResult : script.untilToolResult;
}

/**
 * The agents service's provider settings for a fake (in the test's process or its own): both
 * providers on it, short probe and chat timeouts, no SDK retries (a test's scripted error is
 * answered once).
 */
export function fakeProviderSettings(fake: { openaiBaseUrl: string; anthropicBaseUrl: string }): ProviderSettings {
  return {
    openaiBaseUrl: fake.openaiBaseUrl,
    anthropicBaseUrl: fake.anthropicBaseUrl,
    probeTimeoutMs: 1_000,
    chatTimeoutMs: 5_000,
    chatMaxRetries: 0,
  };
}

export interface RecordedRequest {
  provider: 'openai' | 'anthropic';
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  /** For a hung request: set when the client gave up (closed the connection). */
  aborted: boolean;
}

const DEFAULT_USAGE = { input: 1_000, output: 200 };

export interface FakeProviderOptions {
  /** Serve one API only (the other's requests get 404), as a real provider's server does. */
  only?: 'openai' | 'anthropic' | undefined;
  /** A path the APIs live under, e.g. `/openrouter/api` (OpenRouter's base URL is https://openrouter.ai/api/v1). */
  prefix?: string | undefined;
  /** Serve the control routes (`POST /_fake/probes`, `POST /_fake/scripts`, `GET /_fake/requests`). */
  control?: boolean | undefined;
}

export class FakeProvider {
  readonly requests: RecordedRequest[] = [];
  /** GET /v1/models per key; unknown keys get 401. */
  readonly probes = new Map<string, ProbeOutcome>();
  /** Chat scripts per key: steps consumed one per request (then "done"), a tool loop, or a function of the request's body. */
  private readonly scripts = new Map<string, ChatScript>();
  private readonly sockets = new Set<Socket>();
  private server!: Server;
  private options: FakeProviderOptions = {};
  /** Origin and prefix: the base the APIs live under. */
  url = '';

  static async start(options: FakeProviderOptions = {}): Promise<FakeProvider> {
    const fake = new FakeProvider();
    fake.options = options;
    fake.server = createServer((req, res) => void fake.handle(req, res));
    fake.server.on('connection', (s) => {
      fake.sockets.add(s);
      s.on('close', () => fake.sockets.delete(s));
    });
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}${options.prefix ?? ''}`;
    return fake;
  }

  /** As the SDKs take them: OpenAI's base URL includes /v1, Anthropic's does not. */
  get openaiBaseUrl(): string {
    return `${this.url}/v1`;
  }
  get anthropicBaseUrl(): string {
    return this.url;
  }

  /** What a key's chats answer: steps in order, a tool loop, or a function of each request. */
  script(apiKey: string, steps: ChatScript): void {
    this.probes.set(apiKey, this.probes.get(apiKey) ?? 'ok');
    this.scripts.set(apiKey, Array.isArray(steps) ? [...steps] : steps);
  }

  /** Chat requests made with a key. */
  chats(apiKey: string): RecordedRequest[] {
    return this.requests.filter((r) => r.method === 'POST' && r.headers.authorization === `Bearer ${apiKey}`);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (this.options.control && req.url?.startsWith('/_fake/'))
      return this.control(req, res, Buffer.concat(chunks).toString('utf8'));
    const provider = req.headers['anthropic-version'] ? 'anthropic' : 'openai';
    const record: RecordedRequest = {
      provider,
      method: req.method ?? '',
      path: req.url ?? '',
      headers: req.headers,
      body: Buffer.concat(chunks).toString('utf8'),
      aborted: false,
    };
    this.requests.push(record);
    const auth = req.headers.authorization ?? '';
    const key = auth.startsWith('Bearer ') ? auth.slice(7) : String(req.headers['x-api-key'] ?? '');
    const prefix = this.options.prefix ?? '';
    const fullPath = (req.url ?? '').split('?')[0]!;
    const path = fullPath.startsWith(`${prefix}/`) ? fullPath.slice(prefix.length) : `(outside ${prefix}) ${fullPath}`;
    if (this.options.only && provider !== this.options.only)
      return this.json(res, 404, {
        error: { message: `this server speaks the ${this.options.only} API only`, type: 'invalid_request_error' },
      });
    if (req.method === 'GET' && path === '/v1/models') {
      const outcome = this.probes.get(key) ?? 401;
      if (outcome === 'hang') return this.hang(req, res, record);
      if (outcome !== 'ok') return this.error(res, provider, outcome, key);
      return this.json(
        res,
        200,
        provider === 'openai'
          ? {
              object: 'list',
              data: [{ id: 'gpt-4.1-mini', object: 'model', created: 1_700_000_000, owned_by: 'openai' }],
            }
          : {
              data: [
                {
                  type: 'model',
                  id: 'claude-haiku-4-5',
                  display_name: 'Claude Haiku 4.5',
                  created_at: '2025-10-01T00:00:00Z',
                },
              ],
              has_more: false,
              first_id: 'claude-haiku-4-5',
              last_id: 'claude-haiku-4-5',
            },
      );
    }
    const chatPath = provider === 'openai' ? '/v1/chat/completions' : '/v1/messages';
    if (req.method === 'POST' && path === chatPath) {
      const probe = this.probes.get(key);
      if (probe === undefined) return this.error(res, provider, 401, key);
      const script = this.scripts.get(key);
      let step = nextStep(script, record.body) ?? { text: 'done' };
      while ('gate' in step) {
        await step.gate;
        step = step.then;
      }
      if ('hang' in step) return this.hang(req, res, record);
      if ('error' in step) return this.error(res, provider, step.error, key);
      if (step.delayMs) await new Promise((r) => setTimeout(r, step.delayMs));
      const body = JSON.parse(record.body) as { model: string };
      return this.json(
        res,
        200,
        provider === 'openai' ? openaiAnswer(body.model, step) : anthropicAnswer(body.model, step),
      );
    }
    this.json(res, 404, { error: { message: `no route ${req.method} ${path}`, type: 'invalid_request_error' } });
  }

  /** The control routes of a fake in its own process: what a test would set on the object in its own. */
  private control(req: IncomingMessage, res: ServerResponse, body: string): void {
    const path = req.url?.split('?')[0];
    if (req.method === 'GET' && path === '/_fake/requests') return this.json(res, 200, this.requests);
    const input = (body ? JSON.parse(body) : {}) as {
      key: string;
      outcome?: ProbeOutcome;
      steps?: ChatStep[] | ToolLoopScript;
    };
    if (req.method === 'POST' && path === '/_fake/probes') {
      this.probes.set(input.key, input.outcome ?? 'ok');
      return this.json(res, 200, {});
    }
    if (req.method === 'POST' && path === '/_fake/scripts') {
      this.script(input.key, input.steps ?? []);
      return this.json(res, 200, {});
    }
    this.json(res, 404, { error: `no control route ${req.method} ${path}` });
  }

  private hang(req: IncomingMessage, res: ServerResponse, record: RecordedRequest): void {
    res.on('close', () => (record.aborted = true));
    req.socket.on('close', () => (record.aborted = true));
  }

  /** Each provider's error body; the message quotes the key, as OpenAI's 401 does in part — it must never reach our answers. */
  private error(
    res: ServerResponse,
    provider: 'openai' | 'anthropic',
    outcome: Exclude<ProbeOutcome, 'ok' | 'hang'>,
    key: string,
  ): void {
    const status = outcome === 'quota' ? 429 : outcome;
    const openai: Record<number | string, [string, string | null]> = {
      401: ['invalid_request_error', 'invalid_api_key'],
      402: ['billing_error', null],
      403: ['permission_error', null],
      quota: ['insufficient_quota', 'insufficient_quota'],
      429: ['requests', 'rate_limit_exceeded'],
      500: ['server_error', null],
      529: ['overloaded', null],
    };
    const anthropic: Record<number | string, string> = {
      401: 'authentication_error',
      402: 'billing_error',
      403: 'permission_error',
      quota: 'rate_limit_error',
      429: 'rate_limit_error',
      500: 'api_error',
      529: 'overloaded_error',
    };
    const message = `Incorrect API key provided: ${key}. (fake provider answer ${status})`;
    res.setHeader('x-should-retry', 'false');
    this.json(
      res,
      status,
      provider === 'openai'
        ? { error: { message, type: openai[outcome]![0], param: null, code: openai[outcome]![1] } }
        : { type: 'error', error: { type: anthropic[outcome], message } },
    );
  }

  private json(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }
}

let callIds = 0;

function openaiAnswer(model: string, step: Exclude<ChatStep, { error: unknown } | { hang: true } | { gate: unknown }>) {
  const usage = step.usage ?? DEFAULT_USAGE;
  const tools = 'tools' in step ? step.tools : [];
  return {
    id: `chatcmpl-${++callIds}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        finish_reason: tools.length ? 'tool_calls' : 'stop',
        logprobs: null,
        message: {
          role: 'assistant',
          content: step.text ?? null,
          refusal: null,
          ...(tools.length
            ? {
                tool_calls: tools.map((t) => ({
                  id: `call_${++callIds}`,
                  type: 'function',
                  function: { name: t.name, arguments: JSON.stringify(t.arguments) },
                })),
              }
            : {}),
        },
      },
    ],
    usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output },
  };
}

function anthropicAnswer(
  model: string,
  step: Exclude<ChatStep, { error: unknown } | { hang: true } | { gate: unknown }>,
) {
  const usage = step.usage ?? DEFAULT_USAGE;
  const tools = 'tools' in step ? step.tools : [];
  return {
    id: `msg_${++callIds}`,
    type: 'message',
    role: 'assistant',
    model,
    stop_sequence: null,
    stop_reason: tools.length ? 'tool_use' : 'end_turn',
    content: [
      ...(step.text ? [{ type: 'text', text: step.text }] : []),
      ...tools.map((t) => ({ type: 'tool_use', id: `toolu_${++callIds}`, name: t.name, input: t.arguments })),
    ],
    usage: { input_tokens: usage.input, output_tokens: usage.output },
  };
}

/**
 * A fake provider in a process of its own, on its own port: a tenant's server as base_url names
 * it. Scripted over its control routes; `stop` ends the process this started.
 */
export class FakeProviderProcess {
  private constructor(
    private readonly running: ServerProcess<{ url: string }>,
    /** Origin and prefix: the base the APIs live under. */
    readonly url: string,
  ) {}

  /** Spawns testing/fake-provider-main.js and waits until it listens. */
  static async start(options: Omit<FakeProviderOptions, 'control'> = {}): Promise<FakeProviderProcess> {
    const running = await spawnServerProcess<{ url: string }>(
      new URL('./fake-provider-main.js', import.meta.url),
      options,
    );
    return new FakeProviderProcess(running, running.info.url);
  }

  /** As the SDKs take them: OpenAI's base URL includes /v1, Anthropic's does not. */
  get openaiBaseUrl(): string {
    return `${this.url}/v1`;
  }
  get anthropicBaseUrl(): string {
    return this.url;
  }
  get port(): number {
    return Number(new URL(this.url).port);
  }

  /** What GET /v1/models answers for a key. */
  probe(apiKey: string, outcome: ProbeOutcome): Promise<void> {
    return this.post('/_fake/probes', { key: apiKey, outcome });
  }

  /** What a key's chats answer: steps in order, or a tool loop. */
  script(apiKey: string, steps: ChatStep[] | ToolLoopScript): Promise<void> {
    return this.post('/_fake/scripts', { key: apiKey, steps });
  }

  /** Every API request the process received, in order. */
  async requests(): Promise<RecordedRequest[]> {
    const res = await fetch(`${this.origin}/_fake/requests`);
    return (await res.json()) as RecordedRequest[];
  }

  /** Chat requests made with a key. */
  async chats(apiKey: string): Promise<RecordedRequest[]> {
    return (await this.requests()).filter(
      (r) =>
        r.method === 'POST' && (r.headers.authorization === `Bearer ${apiKey}` || r.headers['x-api-key'] === apiKey),
    );
  }

  stop(): Promise<void> {
    return this.running.stop();
  }

  private get origin(): string {
    return new URL(this.url).origin;
  }

  private async post(path: string, body: unknown): Promise<void> {
    const res = await fetch(`${this.origin}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`fake provider ${path}: HTTP ${res.status}`);
  }
}
