/**
 * The route table, built from the protos: every rpc with a google.api.http annotation becomes a
 * route, with the policy its (workauto.api.v1.policy) option declares. Nothing here is written
 * per endpoint.
 */
import { readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import { PROTO_ROOT, loadProtoRoot } from '@workauto/protos';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type AuthKind = 'api_key' | 'platform_admin' | 'none';
export type Level = 'none' | 'read' | 'write' | 'admin';

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
  requestType: protobuf.Type;
  responseType: protobuf.Type;
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
}

const AUTH: Record<string, AuthKind> = { AUTH_UNSPECIFIED: 'api_key', AUTH_API_KEY: 'api_key', AUTH_PLATFORM_ADMIN: 'platform_admin', AUTH_NONE: 'none' };
const LEVEL: Record<string, Level> = { ACCESS_LEVEL_UNSPECIFIED: 'none', ACCESS_LEVEL_NONE: 'none', ACCESS_LEVEL_READ: 'read', ACCESS_LEVEL_WRITE: 'write', ACCESS_LEVEL_ADMIN: 'admin' };
const SKIPPED_PACKAGES = new Set(['api', 'events']);

/** proto/workauto/<pkg>/v1/*.proto of every package that can hold services. */
export function serviceProtoFiles(): string[] {
  const base = join(PROTO_ROOT, 'workauto');
  const files: string[] = [];
  for (const pkg of readdirSync(base).sort()) {
    if (SKIPPED_PACKAGES.has(pkg)) continue;
    const dir = join(base, pkg, 'v1');
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.proto')).sort()) files.push(`workauto/${pkg}/v1/${f}`);
  }
  return files;
}

function option<T>(method: protobuf.Method, name: string): T | undefined {
  for (const o of (method.parsedOptions ?? []) as Record<string, unknown>[]) if (name in o) return o[name] as T;
  return undefined;
}

export function compileTemplate(template: string): { pattern: RegExp; params: string[]; literals: number } {
  const params: string[] = [];
  let literals = 0;
  const source = template
    .split('/')
    .map((seg) => {
      const m = /^\{([a-z_][a-z0-9_]*)\}$/.exec(seg);
      if (m) {
        params.push(m[1]!);
        return '([^/]+)';
      }
      if (seg) literals++;
      return seg.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
    })
    .join('/');
  return { pattern: new RegExp(`^${source}/?$`), params, literals };
}

export function buildRoutes(root: protobuf.Root): Route[] {
  const routes: Route[] = [];
  const visit = (ns: protobuf.NamespaceBase) => {
    for (const obj of ns.nestedArray) {
      if (obj instanceof protobuf.Service) {
        const pkg = obj.fullName.split('.')[2] ?? '';
        for (const method of obj.methodsArray) {
          const http = option<Record<string, string>>(method, '(google.api.http)');
          if (!http) continue;
          const verb = (['get', 'post', 'put', 'patch', 'delete'] as const).find((v) => typeof http[v] === 'string');
          if (!verb) continue;
          const template = http[verb]!;
          const policy = option<Record<string, string>>(method, '(workauto.api.v1.policy)') ?? {};
          method.resolve();
          const responseType = method.resolvedResponseType!;
          routes.push({
            method: verb.toUpperCase() as HttpMethod,
            template,
            ...compileTemplate(template),
            grpcPath: `/${obj.fullName.slice(1)}/${method.name}`,
            rpc: method.name,
            downstream: pkg,
            requestType: method.resolvedRequestType!,
            responseType,
            body: http.body ?? '',
            responseBody: http.response_body ?? '',
            auth: AUTH[policy.auth ?? 'AUTH_UNSPECIFIED'] ?? 'api_key',
            domain: policy.domain ?? '',
            level: LEVEL[policy.level ?? 'ACCESS_LEVEL_UNSPECIFIED'] ?? 'none',
            successStatus:
              responseType.fullName === '.workauto.api.v1.Redirect' ? 302
              : responseType.fullName === '.google.protobuf.Empty' ? 204
              : method.name.startsWith('Create') ? 201
              : 200,
            description: (method.comment ?? '').trim(),
          });
        }
      } else if (obj instanceof protobuf.Namespace) {
        visit(obj);
      }
    }
  };
  visit(root);
  // Literal segments win over parameters: POST /invitations/claim before /invitations/{id}.
  return routes.sort((a, b) => b.literals - a.literals || a.template.localeCompare(b.template));
}

export function loadRoutes(): Route[] {
  return buildRoutes(loadProtoRoot(serviceProtoFiles()));
}

export type Match = { route: Route; params: Record<string, string> } | { methodNotAllowed: HttpMethod[] } | undefined;

export function matchRoute(routes: Route[], method: string, path: string): Match {
  const allowed = new Set<HttpMethod>();
  for (const route of routes) {
    const m = route.pattern.exec(path);
    if (!m) continue;
    if (route.method !== method) {
      allowed.add(route.method);
      continue;
    }
    const params: Record<string, string> = {};
    route.params.forEach((p, i) => {
      params[p] = decodeURIComponent(m[i + 1]!);
    });
    return { route, params };
  }
  return allowed.size ? { methodNotAllowed: [...allowed] } : undefined;
}
