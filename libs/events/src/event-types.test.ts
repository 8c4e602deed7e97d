import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { Event } from '@workauto/protos/workauto/events/v1/event.js';
import { EVENT_TYPES } from './event-types/index.js';
import { eventChannels } from './outbox.js';

/** The `type` column of docs/events.md's tables: rows that start with | `resource.verb` |. */
function documentedTypes(): string[] {
  const doc = readFileSync(new URL('../../../docs/events.md', import.meta.url), 'utf8');
  return [...doc.matchAll(/^\| `([a-z_]+\.[a-z_]+)` \|/gm)].map((m) => m[1]!);
}

describe('event type catalogue', () => {
  it('lists exactly the types docs/events.md documents, once each', () => {
    const names = EVENT_TYPES.map((t) => t.name);
    assert.equal(new Set(names).size, names.length, 'a type is listed twice');
    assert.deepEqual([...names].sort(), [...new Set(documentedTypes())].sort());
  });

  it('gives every type a description and a <resource_type>.<verb> name', () => {
    for (const t of EVENT_TYPES) {
      assert.match(t.name, /^[a-z][a-z_]*\.[a-z][a-z_]*$/);
      assert.ok(t.description.length > 10, `${t.name} has no real description`);
    }
  });
});

describe('event channels', () => {
  it('is the resource type, plus <parent_type>:<parent_id> when the resource has a parent', () => {
    assert.deepEqual(eventChannels({ resourceType: 'note' }), ['note']);
    assert.deepEqual(eventChannels({ resourceType: 'deal', parent: { type: 'pipeline', id: 'p-1' } }), [
      'deal',
      'pipeline:p-1',
    ]);
  });

  it('travels in the encoded event', () => {
    const bytes = Event.encode(Event.fromPartial({ id: 'e', channels: ['deal', 'pipeline:p-1'] })).finish();
    assert.deepEqual(Event.decode(bytes).channels, ['deal', 'pipeline:p-1']);
  });
});
