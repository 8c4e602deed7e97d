/**
 * The route table, built from the protos: every rpc with a google.api.http annotation becomes a
 * route, with the policy its (workauto.api.v1.policy) option declares. Nothing here is written
 * per endpoint. A malformed annotation fails start-up, so a typo never becomes a silent 404.
 */
import { ScalarType, type DescFile, type DescMessage, type DescMethod } from '@bufbuild/protobuf';
// Not '@workauto/grpc': main.ts loads this module (through cors.ts) before telemetry starts, and
// grpc-js loaded then would never be traced.
import { DOMAINS, isDomain, protoAccessLevel, type AccessLevel as Level } from '@workauto/grpc/access';
import {
  commentOf,
  fieldByName,
  loadCodecs,
  loadRules,
  loadSchema,
  messageType,
  optionOf,
  type MessageType,
  type Schema,
} from '@workauto/protos';
import { Auth } from '@workauto/protos/workauto/api/v1/policy.js';

type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
type AuthKind = 'api_key' | 'platform_admin' | 'none' | 'api_key_or_token';

export interface Route {
  method: HttpMethod;
  /** As annotated, e.g. /api/v1/members/{id}. */
  template: string;
  pattern: RegExp;
  /** Path parameter names in order. */
  params: string[];
  /** Literal segments: more specific routes are matched first. */
  literals: number;
  /** gRPC method path, e.g. /workauto.identity.v1.IdentityService/GetMember. */
  grpcPath: string;
  rpc: string;
  /** Downstream key: the proto package segment (workauto.<key>.v1). */
  downstream: string;
  /** The request and response messages: descriptor (fields, options) and ts-proto codec. */
  requestType: MessageType;
  responseType: MessageType;
  /** '' no body, '*' the whole request, else the request field the body maps to. */
  body: string;
  /** '' the whole response, else the response field sent as the body. */
  responseBody: string;
  auth: AuthKind;
  domain: string;
  level: Level;
  /** 201 for Create*, 204 for google.protobuf.Empty, 302 for a Redirect, else 200. */
  successStatus: number;
  description: string;
  /** The policy's deadline_ms: this rpc's downstream deadline instead of the gateway's default. */
  deadlineMs?: number;
  /** A server-streaming rpc of google.api.HttpBody: its chunks are sent to the client as they come. */
  stream: boolean;
  /** The media types of a google.api.HttpBody response (the policy's response_content_types). */
  contentTypes: string[];
  /** An AUTH_API_KEY_OR_TOKEN route's token_tenant_rpc: which tenant a token belongs to (token-tenants.ts). */
  tokenTenant?: TokenTenantRpc;
}

/** The rpc that names a token's tenant: same service as its route, answers workauto.api.v1.TokenTenant. */
interface TokenTenantRpc {
  grpcPath: string;
  requestType: MessageType;
  responseType: MessageType;
}

/** The public name of a route-table entry (what `Gateway.routes` holds). */
export type RouteInfo = Route;

const VERBS = ['get', 'post', 'put', 'patch', 'delete'] as const;
const AUTH: Record<number, AuthKind> = {
  [Auth.AUTH_UNSPECIFIED]: 'api_key',
  [Auth.AUTH_API_KEY]: 'api_key',
  [Auth.AUTH_PLATFORM_ADMIN]: 'platform_admin',
  [Auth.AUTH_NONE]: 'none',
  [Auth.AUTH_API_KEY_OR_TOKEN]: 'api_key_or_token',
};
/** The request field an AUTH_API_KEY_OR_TOKEN route's token comes in (a query parameter). */
export const TOKEN_FIELD = 'token';
/** Packages that hold shared messages, not services. */
const SKIPPED_PACKAGES = new Set(['api', 'events']);
const PARAM = /^\{([a-z_][a-z0-9_]*)\}$/;
const LITERAL = /^[A-Za-z0-9._~-]+$/;

/** The options as optionOf reads them (@bufbuild/protobuf's messages name fields in lowerCamel). */
interface HttpRule {
  pattern: { case: string | undefined; value?: unknown };
  body: string;
  responseBody: string;
  additionalBindings: unknown[];
}
interface Policy {
  auth: number;
  domain: string;
  level: number;
  deadlineMs: number;
  responseContentTypes: string[];
  tokenTenantRpc: string;
}

/** The files of workauto/<pkg>/v1/ of every package that can hold services. */
export function serviceFiles(schema: Schema): DescFile[] {
  return schema.files.filter((f) => {
    const [root, pkg] = f.proto.package.split('.');
    return root === 'workauto' && pkg !== undefined && !SKIPPED_PACKAGES.has(pkg);
  });
}

/**
 * `/api/v1/members/{member_id}/access-policies` → an anchored pattern. Only whole-segment
 * `{field}` variables are supported (no `{name=…}` sub-paths, no `:verb` suffixes): anything else
 * throws, so an annotation the gateway cannot serve fails at start-up.
 */
export function compileTemplate(template: string): { pattern: RegExp; params: string[]; literals: number } {
  if (!template.startsWith('/')) throw new Error(`path template ${template} must start with /`);
  const params: string[] = [];
  let literals = 0;
  const source = template
    .slice(1)
    .split('/')
    .map((seg) => {
      const m = PARAM.exec(seg);
      if (m) {
        if (params.includes(m[1]!)) throw new Error(`path template ${template} binds {${m[1]}} twice`);
        params.push(m[1]!);
        return '([^/]+)';
      }
      if (!LITERAL.test(seg))
        throw new Error(`path template ${template}: segment "${seg}" is neither a literal nor a {field} variable`);
      literals++;
      return seg.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
    })
    .join('/');
  return { pattern: new RegExp(`^/${source}/?$`), params, literals };
}

/** Checks an annotation against its messages: every name it uses must be a field that can carry it. */
function checkBindings(
  where: string,
  request: DescMessage,
  response: DescMessage,
  params: string[],
  body: string,
  responseBody: string,
): void {
  for (const p of params) {
    const f = fieldByName(request, p);
    if (!f) throw new Error(`${where}: path variable {${p}} is not a field of ${request.name}`);
    if (f.fieldKind !== 'scalar' && f.fieldKind !== 'enum')
      throw new Error(`${where}: path variable {${p}} must be a scalar or enum field`);
  }
  if (body && body !== '*') {
    if (!fieldByName(request, body)) throw new Error(`${where}: body "${body}" is not a field of ${request.name}`);
    if (params.includes(body)) throw new Error(`${where}: body "${body}" is also a path variable`);
  }
  if (responseBody && !fieldByName(response, responseBody))
    throw new Error(`${where}: response_body "${responseBody}" is not a field of ${response.name}`);
}

function routeOf(method: DescMethod): Route | undefined {
  const http = optionOf<HttpRule>(method, 'google.api.http');
  if (!http) return undefined; // internal rpcs (AuthenticateToken) are not routable
  const where = `${method.parent.typeName}.${method.name}`;
  const verb = VERBS.find((v) => v === http.pattern.case);
  if (!verb || http.additionalBindings.length)
    throw new Error(
      `${where}: google.api.http needs exactly one of ${VERBS.join(', ')} (custom verbs and additional_bindings are not supported)`,
    );
  if (method.methodKind === 'client_streaming' || method.methodKind === 'bidi_streaming')
    throw new Error(`${where}: client-streaming rpcs cannot be routed`);
  const template = http.pattern.value as string;
  const policy: Partial<Policy> = optionOf<Policy>(method, 'workauto.api.v1.policy') ?? {};
  const compiled = compileTemplate(template);
  const { body, responseBody } = http;
  checkBindings(where, method.input, method.output, compiled.params, body, responseBody);
  // A raw body is not replayable JSON (Idempotency-Key records): only reads may return one.
  const httpBody = method.output.typeName === 'google.api.HttpBody';
  if (httpBody && verb !== 'get') throw new Error(`${where}: google.api.HttpBody responses are for GET routes only`);
  // A stream goes to the client chunk by chunk: only raw bytes can, not a JSON document.
  const stream = method.methodKind === 'server_streaming';
  if (stream && !httpBody)
    throw new Error(`${where}: only a stream of google.api.HttpBody can be routed (a server-streaming rpc)`);
  const contentTypes = policy.responseContentTypes ?? [];
  if (contentTypes.length && !httpBody)
    throw new Error(`${where}: response_content_types is for google.api.HttpBody responses`);
  const auth = AUTH[policy.auth ?? Auth.AUTH_UNSPECIFIED];
  const level = protoAccessLevel.toLevel(policy.level);
  const domain = policy.domain ?? '';
  if (!auth || !level) throw new Error(`${where}: unknown policy auth ${policy.auth}, level ${policy.level}`);
  if (domain && !isDomain(domain))
    throw new Error(`${where}: policy names domain ${JSON.stringify(domain)}, not one of ${DOMAINS.join(', ')}`);
  if (domain && level === 'none') throw new Error(`${where}: policy names domain ${domain} without a level`);
  if (auth === 'api_key_or_token') {
    // The token travels in the URL, which only a read may carry (a URL is logged by proxies and kept in histories).
    const token = fieldByName(method.input, TOKEN_FIELD);
    if (verb !== 'get' || token?.fieldKind !== 'scalar' || token.scalar !== ScalarType.STRING)
      throw new Error(
        `${where}: AUTH_API_KEY_OR_TOKEN needs a GET route and a string request field \`${TOKEN_FIELD}\``,
      );
  }
  const tokenTenant = auth === 'api_key_or_token' ? tokenTenantRpc(where, method, policy.tokenTenantRpc) : undefined;
  return {
    method: verb.toUpperCase() as HttpMethod,
    template,
    ...compiled,
    grpcPath: `/${method.parent.typeName}/${method.name}`,
    rpc: method.name,
    downstream: method.parent.typeName.split('.')[1] ?? '',
    requestType: messageType(method.input),
    responseType: messageType(method.output),
    body,
    responseBody,
    auth,
    domain,
    level,
    successStatus:
      method.output.typeName === 'workauto.api.v1.Redirect'
        ? 302
        : method.output.typeName === 'google.protobuf.Empty'
          ? 204
          : method.name.startsWith('Create')
            ? 201
            : 200,
    description: commentOf(method),
    ...(policy.deadlineMs ? { deadlineMs: policy.deadlineMs } : {}),
    stream,
    contentTypes,
    ...(tokenTenant ? { tokenTenant } : {}),
  };
}

/**
 * The rpc an AUTH_API_KEY_OR_TOKEN route's policy names in token_tenant_rpc: every request reaches
 * its service admitted under a tenant, and a token's tenant is known only to the service.
 */
function tokenTenantRpc(where: string, method: DescMethod, name: string | undefined): TokenTenantRpc {
  const rpc = name ? method.parent.methods.find((m) => m.name === name) : undefined;
  if (!rpc || rpc.methodKind !== 'unary' || rpc.output.typeName !== 'workauto.api.v1.TokenTenant')
    throw new Error(
      `${where}: AUTH_API_KEY_OR_TOKEN needs token_tenant_rpc naming a unary rpc of ${method.parent.name} that returns workauto.api.v1.TokenTenant${name ? ` (${name} is not one)` : ''}`,
    );
  return {
    grpcPath: `/${rpc.parent.typeName}/${rpc.name}`,
    requestType: messageType(rpc.input),
    responseType: messageType(rpc.output),
  };
}

/** The routes of the services declared in `files`. */
export function buildRoutes(files: DescFile[]): Route[] {
  const routes = files.flatMap((file) =>
    file.services.flatMap((service) => service.methods.flatMap((m) => routeOf(m) ?? [])),
  );
  const seen = new Map<string, string>();
  for (const r of routes) {
    // Same shape, different variable names, would make one of the two unreachable.
    const key = `${r.method} ${r.template.replace(/\{[^}]+\}/g, '{}')}`;
    if (seen.has(key)) throw new Error(`${r.rpc} and ${seen.get(key)} both claim ${key}`);
    seen.set(key, r.rpc);
  }
  // Literal segments win over parameters: POST /invitations/claim before /invitations/{id}.
  return routes.sort(
    (a, b) => b.literals - a.literals || a.template.localeCompare(b.template) || a.method.localeCompare(b.method),
  );
}

/** The product's routes, from the descriptor set, with the codecs of their messages loaded. */
export async function loadRoutes(): Promise<Route[]> {
  const files = serviceFiles(loadSchema());
  await Promise.all([loadCodecs(files), loadRules()]);
  return buildRoutes(files);
}

export type Match =
  | { route: Route; params: Record<string, string> }
  | { methodNotAllowed: HttpMethod[] }
  | { badPath: string }
  | undefined;

/**
 * The routes a path can match, by its segment count and third segment (`/api/v1/<resource>/…`),
 * in the routes' order: a route's variables match whole non-empty segments and its literals match
 * themselves, so no other route can match. Built once per route list; matching then runs a few
 * patterns instead of every route's (the linear scan was among the gateway's top frames).
 */
interface RouteIndex {
  byKey: Map<string, Route[]>;
  /** Routes whose third segment is a variable, by segment count (merged in order when present). */
  anyResource: Map<number, Route[]>;
}
const indexes = new WeakMap<Route[], RouteIndex>();

function segmentsOf(template: string): string[] {
  return template.slice(1).split('/');
}

function indexOf(routes: Route[]): RouteIndex {
  let index = indexes.get(routes);
  if (index) return index;
  index = { byKey: new Map(), anyResource: new Map() };
  for (const route of routes) {
    const segments = segmentsOf(route.template);
    const third = segments[2];
    if (third !== undefined && !PARAM.test(third)) {
      const key = `${segments.length}/${third}`;
      index.byKey.set(key, [...(index.byKey.get(key) ?? []), route]);
    } else {
      index.anyResource.set(segments.length, [...(index.anyResource.get(segments.length) ?? []), route]);
    }
  }
  indexes.set(routes, index);
  return index;
}

/** The candidates for a path, in the routes' order. */
function candidates(routes: Route[], path: string): Route[] {
  const index = indexOf(routes);
  const segments = segmentsOf(path.endsWith('/') ? path.slice(0, -1) : path);
  const keyed = index.byKey.get(`${segments.length}/${segments[2]}`) ?? [];
  const any = index.anyResource.get(segments.length);
  if (!any) return keyed;
  const order = new Map(routes.map((r, i) => [r, i]));
  return [...keyed, ...any].sort((a, b) => order.get(a)! - order.get(b)!);
}

/** The route for a method and a (still percent-encoded) path; path variables are decoded here. */
export function matchRoute(routes: Route[], method: string, path: string): Match {
  const allowed = new Set<HttpMethod>();
  for (const route of candidates(routes, path)) {
    const m = route.pattern.exec(path);
    if (!m) continue;
    if (route.method !== method) {
      allowed.add(route.method);
      continue;
    }
    const params: Record<string, string> = {};
    for (const [i, p] of route.params.entries()) {
      try {
        params[p] = decodeURIComponent(m[i + 1]!);
      } catch {
        return { badPath: p };
      }
    }
    return { route, params };
  }
  return allowed.size ? { methodNotAllowed: [...allowed] } : undefined;
}
