import { checkEnum, errors, type Validator } from '@workauto/grpc';
import { checkAuth, type AuthFields, type AuthInput, type AuthType } from '../../domain/auth.js';
import * as apps from '../../repo/apps.js';
import type { AppRow } from '../../repo/apps.js';
import { authTypes, partsOne, toApp } from '../common.js';

// What the app handlers share: the auth checks, finding an app, its API view with its tools. The
// requests' field rules (slug, lengths, JSON sizes) are in the proto, checked before a handler runs.

/** The auth fields of a request: the enum mapped, then checked (domain/auth.ts). */
export function authOf(
  v: Validator,
  auth: (Omit<AuthFields, 'type'> & { type: number }) | undefined,
  allowNone: boolean,
): AuthInput {
  if (auth) checkEnum(v, 'auth.type', auth.type, authTypes, !allowNone);
  const type = auth ? (authTypes.toDomain(auth.type) as AuthType | undefined) : undefined;
  return checkAuth(v, 'auth', auth && { ...auth, type }, { allowNone });
}

/** The tenant's app of that slug (locked with 'update'), or a 404. */
export async function mustFind(
  db: Parameters<typeof apps.findApp>[0],
  tenantId: string,
  slug: string,
  lock?: 'update',
): Promise<AppRow> {
  const row = await apps.findApp(db, tenantId, slug, lock);
  if (!row) throw errors.notFound('app', slug);
  return row;
}

/** The App of a row with its parts (discovered tools, OAuth connection). */
export const viewOf = async (db: Parameters<typeof partsOne>[0], row: AppRow, full: boolean) =>
  toApp(row, await partsOne(db, row), full);
