/**
 * Shape limits of a JSON request body, checked right after parsing and before the JSON → protobuf
 * mapping (which recurses, and whose output the codec encodes recursively): a body past them is
 * the client's 400, never a stack overflow, a serialiser failure or a downstream INTERNAL.
 *
 * The walk is iterative (an explicit stack), so a 100,000-deep body costs a loop, not the call stack.
 * The limits sit well above what any field of the API accepts (the services enforce their own, with
 * field-level messages) and are documented in docs/decisions.md.
 */
import type { NextFunction, Request, Response } from 'express';
import { gatewayErrors } from './errors.js';

export const BODY_LIMITS = {
  /** Containers (objects and arrays) nested inside each other; `{"a":1}` is 1 (docs/api.md §4: 32). */
  maxDepth: 32,
  /** Characters of one string value or object key (a note's body, the longest field, takes 100,000). */
  maxStringLength: 200_000,
  /** Items of one array. */
  maxArrayLength: 1_000,
  /** Keys of one object. */
  maxObjectKeys: 1_000,
} as const;

export interface BodyLimitViolation {
  field: string;
  description: string;
}

/** The first limit the value breaks, with the JSON path where it breaks it; undefined when within all. */
export function checkBodyLimits(body: unknown, limits = BODY_LIMITS): BodyLimitViolation | undefined {
  const stack: { value: unknown; depth: number; path: string }[] = [{ value: body, depth: 0, path: '' }];
  while (stack.length) {
    const { value, depth, path } = stack.pop()!;
    const at = path || '(body)';
    if (typeof value === 'string') {
      if (value.length > limits.maxStringLength)
        return { field: at, description: `is longer than ${limits.maxStringLength} characters` };
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    const level = depth + 1;
    if (level > limits.maxDepth)
      return { field: at, description: `nests JSON deeper than ${limits.maxDepth} levels; flatten the value` };
    if (Array.isArray(value)) {
      if (value.length > limits.maxArrayLength)
        return { field: at, description: `has more than ${limits.maxArrayLength} items; send fewer per request` };
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], depth: level, path: `${path}[${i}]` });
      continue;
    }
    const keys = Object.keys(value);
    if (keys.length > limits.maxObjectKeys)
      return { field: at, description: `has more than ${limits.maxObjectKeys} keys` };
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      const child = path ? `${path}.${key.slice(0, 64)}` : key.slice(0, 64);
      if (key.length > limits.maxStringLength)
        return { field: child, description: `is a key longer than ${limits.maxStringLength} characters` };
      stack.push({ value: (value as Record<string, unknown>)[key], depth: level, path: child });
    }
  }
  return undefined;
}

/** Express middleware after express.json(): a body past the limits is a 400 naming the first place it breaks one. */
export function bodyLimits() {
  return (req: Request, _res: Response, next: NextFunction): void => {
    const violation = req.body === undefined ? undefined : checkBodyLimits(req.body);
    if (violation)
      return next(
        gatewayErrors.badRequest(
          [violation],
          `the request body is too large in shape: ${violation.field} ${violation.description}`,
        ),
      );
    next();
  };
}
