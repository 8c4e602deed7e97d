import type { CalendarDeps, Handler } from '../common.js';
import { feedChunks } from './common.js';

export function streamCalendarFeed({ pool }: CalendarDeps): Handler<'streamCalendarFeed'> {
  return (req, ctx) => feedChunks(pool, req.id, req.token ?? '', ctx);
}
