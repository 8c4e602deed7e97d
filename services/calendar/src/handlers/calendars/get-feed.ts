import { errors } from '@workauto/grpc';
import type { CalendarDeps, Handler } from '../common.js';
import { CONTENT_TYPE, feedChunks } from './common.js';

/** The most the deprecated one-message GetCalendarFeed answers (a gRPC message may hold 4 MiB). */
const ONE_MESSAGE_MAX_BYTES = 3 * 1024 * 1024;

export function getCalendarFeed({ pool }: CalendarDeps): Handler<'getCalendarFeed'> {
  return async (req, ctx) => {
    const parts: Buffer[] = [];
    let size = 0;
    for await (const chunk of feedChunks(pool, req.id, '', ctx)) {
      size += chunk.data.length;
      if (size > ONE_MESSAGE_MAX_BYTES)
        throw errors.failedPrecondition(
          'FEED_TOO_LARGE',
          'the feed is larger than one message may hold: read it with StreamCalendarFeed (GET /calendars/{id}/events.ics)',
        );
      parts.push(Buffer.from(chunk.data));
    }
    return { content_type: CONTENT_TYPE, data: Buffer.concat(parts), extensions: [] };
  };
}
