/** The calendar service's domain event types (docs/events.md), for GET /webhook-event-types. */
export const calendarEventTypes: { name: string; description: string }[] = [
  { name: 'calendar.created', description: 'A calendar was created.' },
  { name: 'calendar.updated', description: 'A calendar’s name, description, time zone, color or metadata changed.' },
  { name: 'calendar.deleted', description: 'A calendar was deleted (soft), with all its events.' },
  {
    name: 'calendar.feed_token_created',
    description:
      'A calendar got a new feed URL (POST /calendars/{id}/feed-token), replacing the one it had (never the token).',
  },
  {
    name: 'calendar.feed_token_revoked',
    description: 'A calendar’s feed URL was revoked (DELETE /calendars/{id}/feed-token).',
  },
  {
    name: 'calendar_event.created',
    description:
      'An event was created: a single event, the master of a series, an exception (update_scope this), or the new master of a this_and_following split.',
  },
  {
    name: 'calendar_event.updated',
    description:
      'An event changed (its sequence went up by 1): PUT on it, on its series (all), a split that ended it, or an occurrence it excluded.',
  },
  {
    name: 'calendar_event.deleted',
    description:
      'An event was deleted (soft): DELETE on it or its series, its calendar’s deletion, or an exception whose occurrence left the series.',
  },
];
