import { parsePage, toPage, type CursorCodec } from '@workauto/grpc';
import { BLUEPRINTS } from '../../domain/blueprints.js';
import { toBlueprint, type Handler } from '../common.js';

/** A blueprints page continues after the blueprint whose id the cursor names (base64url). */
const BLUEPRINT_CURSOR: CursorCodec<string> = {
  decode: (text) => {
    const id = Buffer.from(text, 'base64url').toString();
    return BLUEPRINTS.some((b) => b.id === id && Buffer.from(id).toString('base64url') === text) ? id : undefined;
  },
  encode: (id) => Buffer.from(id).toString('base64url'),
};

export function listAgentBlueprints(): Handler<'listAgentBlueprints'> {
  return async (req) => {
    // A short registry in code, paged over the array by its ids.
    const page = parsePage(req, BLUEPRINT_CURSOR);
    const start = page.after === undefined ? 0 : BLUEPRINTS.findIndex((b) => b.id === page.after) + 1;
    const rows = BLUEPRINTS.slice(start, start + page.size);
    const more = start + page.size < BLUEPRINTS.length;
    return toPage(
      { rows, keys: rows.map((b) => b.id), ...(more ? { next: rows.at(-1)!.id } : {}) },
      toBlueprint,
      BLUEPRINT_CURSOR,
    );
  };
}
