-- Calendars and their events. An event row is a single event, the master of a series (rrule set),
-- or an exception (series_id + recurrence_id: one occurrence of its master, changed).
-- Occurrences of a series are computed on read from the master (docs/calendar.md), never stored.

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
