-- Calendars and their events. An event row is a single event, the master of a series (rrule set),
-- or an exception (series_id + recurrence_id: one occurrence of its master, changed).
-- `occurrences` indexes what GET /events lists (docs/calendar.md): derived from events, rebuilt
-- in the transaction of every change, covering each series from a year back to 400 days ahead.

CREATE TABLE calendars (
  id          uuid PRIMARY KEY,
  tenant_id   uuid NOT NULL,
  name        text NOT NULL,
  description text,
  timezone    text NOT NULL,
  color       text,
  metadata    jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  deleted_at  timestamptz
);
CREATE INDEX calendars_tenant_page ON calendars (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

CREATE TABLE events (
  id             uuid PRIMARY KEY,
  tenant_id      uuid NOT NULL,
  calendar_id    uuid NOT NULL REFERENCES calendars (id),
  series_id      uuid REFERENCES events (id),
  recurrence_id  timestamptz,
  title          text NOT NULL,
  description    text,
  location       text,
  location_lat   double precision,
  location_lng   double precision,
  conference_url text,
  color          text,
  event_type     text NOT NULL CHECK (event_type IN ('default', 'focus_time', 'out_of_office', 'working_location')),
  status         text NOT NULL CHECK (status IN ('confirmed', 'tentative', 'cancelled')),
  availability   text NOT NULL CHECK (availability IN ('busy', 'free')),
  visibility     text NOT NULL CHECK (visibility IN ('default', 'public', 'private', 'confidential')),
  is_all_day     boolean NOT NULL,
  start_at       timestamptz,
  end_at         timestamptz,
  start_date     date,
  end_date       date,
  timezone       text NOT NULL,
  rrule          text,
  exdates        timestamptz[] NOT NULL DEFAULT '{}',
  reminders      jsonb NOT NULL DEFAULT '[]',
  organizer_id   uuid,
  ical_uid       text NOT NULL,
  sequence       integer NOT NULL DEFAULT 0,
  metadata       jsonb NOT NULL DEFAULT '{}',
  -- What listings filter on: the first start and the last end of the event (of its last
  -- occurrence for a series; an upper bound for UNTIL rules), as instants; span_end is null for
  -- a series without an end.
  span_start     timestamptz NOT NULL,
  span_end       timestamptz,
  -- Masters: the occurrences starting in [indexed_from, indexed_until) are in `occurrences`
  -- (the rest are expanded on read). Null for other events.
  indexed_from   timestamptz,
  indexed_until  timestamptz,
  -- The index stopped short of 400 days ahead (a dense series): moved forward only when 30 days are left.
  index_capped   boolean NOT NULL DEFAULT false,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  deleted_at     timestamptz,
  CHECK (CASE WHEN is_all_day
              THEN start_date IS NOT NULL AND end_date > start_date AND start_at IS NULL AND end_at IS NULL
              ELSE start_at IS NOT NULL AND end_at >= start_at AND start_date IS NULL AND end_date IS NULL END),
  CHECK ((series_id IS NULL) = (recurrence_id IS NULL)),
  CHECK (series_id IS NULL OR rrule IS NULL)
);
-- One live exception per occurrence.
CREATE UNIQUE INDEX events_one_exception ON events (series_id, recurrence_id) WHERE deleted_at IS NULL AND series_id IS NOT NULL;
-- Window listings: the tenant's (calendar's) live events starting before the window's end.
CREATE INDEX events_window ON events (tenant_id, calendar_id, span_start) WHERE deleted_at IS NULL;
CREATE INDEX events_tenant_window ON events (tenant_id, span_start) WHERE deleted_at IS NULL;
CREATE INDEX events_series ON events (series_id) WHERE series_id IS NOT NULL;
-- Masters whose index the extender moves forward as time passes.
CREATE INDEX events_index_horizon ON events (indexed_until) WHERE deleted_at IS NULL AND rrule IS NOT NULL;

-- What GET /events lists, one row per occurrence: a single event, an exception, or an occurrence
-- of a master (event_id = master, recurrence_id = its original start) that no exception replaces.
CREATE TABLE occurrences (
  tenant_id     uuid NOT NULL,
  calendar_id   uuid NOT NULL,
  event_id      uuid NOT NULL REFERENCES events (id),
  recurrence_id timestamptz,
  -- The keyset: start instant, event id, recurrence id (-infinity for single events).
  sort_start    timestamptz NOT NULL,
  rid_key       timestamptz NOT NULL,
  sort_end      timestamptz NOT NULL,
  start_at      timestamptz,
  end_at        timestamptz,
  start_date    date,
  end_date      date,
  -- Occurrences longer than a day are found by their end (the others by a start at most a day before the window).
  is_long       boolean NOT NULL,
  PRIMARY KEY (event_id, rid_key)
);
CREATE INDEX occurrences_short ON occurrences (tenant_id, sort_start, event_id, rid_key) WHERE NOT is_long;
CREATE INDEX occurrences_long ON occurrences (tenant_id, sort_end) WHERE is_long;
CREATE INDEX occurrences_calendar ON occurrences (calendar_id);
-- next_occurrence: a series' first indexed start after now.
CREATE INDEX occurrences_event_start ON occurrences (event_id, sort_start);
