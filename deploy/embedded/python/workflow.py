"""A user's workflow through the generated Python package `workauto-client` (deploy/embedded/src/e2e/
client-packages.test.ts runs it against a real stack): only the package's own functions and models,
as a Python user would write it. Prints what it saw as one JSON object, which the test checks.

    python workflow.py <base_url> <api_key>
"""

import datetime
import json
import sys
import uuid

from workauto_client import AuthenticatedClient, Client
from workauto_client.api.calendar import (
    create_calendar,
    create_calendar_feed_token,
    create_event,
    list_events,
    stream_calendar_feed,
)
from workauto_client.api.crm_pipelines import create_deal, create_pipeline, list_deal_history, update_deal
from workauto_client.api.notes_tasks import add_note_tag, create_note, create_task, list_note_tags, list_subtasks
from workauto_client.models import (
    AddNoteTagBody,
    CalendarEvent,
    CreateCalendarRequest,
    CreateDealRequest,
    CreateEventRequest,
    CreateNoteRequest,
    CreatePipelineRequest,
    CreateTaskRequest,
    Deal,
    Error,
    ListEventsResult,
    Note,
    Pipeline,
    StageInput,
    StageInputStageType,
    Task,
    UpdateDealBody,
)

base_url, api_key = sys.argv[1], sys.argv[2]
api = AuthenticatedClient(base_url=base_url, token=api_key, raise_on_unexpected_status=True)


def ok(value, kind):
    """The parsed answer of a call that must succeed, or the API's error message."""
    if isinstance(value, Error):
        raise SystemExit(f"{kind}: {value.error.status} {value.error.message}")
    assert isinstance(value, kind), f"expected {kind.__name__}, got {value!r}"
    return value


out = {}

# A note with tags: created, tagged twice (by name), its tags listed.
note = ok(create_note.sync(client=api, body=CreateNoteRequest(title="Kick-off with Globex", body="Scope agreed")), Note)
for tag in ("customer", "Q3"):
    add_note_tag.sync(note.id, client=api, body=AddNoteTagBody(name=tag), idempotency_key=str(uuid.uuid4()))
out["note_tags"] = sorted(t.name for t in list_note_tags.sync(note.id, client=api))

# A task with two subtasks.
parent = ok(create_task.sync(client=api, body=CreateTaskRequest(title="Prepare the proposal")), Task)
for title in ("Draft", "Review"):
    ok(create_task.sync(client=api, body=CreateTaskRequest(title=title, parent_id=parent.id)), Task)
out["subtasks"] = sorted(t.title for t in list_subtasks.sync(parent.id, client=api))

# A deal through the stages of a pipeline: open → open → won.
pipeline = ok(
    create_pipeline.sync(
        client=api,
        body=CreatePipelineRequest(
            name="Sales",
            stages=[
                StageInput(name="Lead", stage_type=StageInputStageType.OPEN),
                StageInput(name="Proposal", stage_type=StageInputStageType.OPEN),
                StageInput(name="Won", stage_type=StageInputStageType.WON),
            ],
        ),
    ),
    Pipeline,
)
stages = sorted(pipeline.stages, key=lambda s: s.display_order)
deal = ok(
    create_deal.sync(
        client=api, body=CreateDealRequest(title="Globex rollout", pipeline_id=pipeline.id, stage_id=stages[0].id, amount=12000)
    ),
    Deal,
)
for stage in stages[1:]:
    deal = ok(update_deal.sync(deal.id, client=api, body=UpdateDealBody(stage_id=stage.id)), Deal)
out["deal_status"] = str(deal.status.value if hasattr(deal.status, "value") else deal.status)
out["deal_history"] = [h.to_stage_name for h in list_deal_history.sync(deal.id, client=api)]

# A weekly event at 09:00 in Europe/Berlin across the change to summer time (2027-03-28).
calendar = ok(create_calendar.sync(client=api, body=CreateCalendarRequest(name="Team", timezone="Europe/Berlin")), object)
ok(
    create_event.sync(
        client=api,
        body=CreateEventRequest(
            calendar_id=calendar.id,
            title="Stand-up",
            start_at=datetime.datetime(2027, 3, 15, 8, 0, tzinfo=datetime.timezone.utc),
            end_at=datetime.datetime(2027, 3, 15, 8, 15, tzinfo=datetime.timezone.utc),
            timezone="Europe/Berlin",
            rrule="FREQ=WEEKLY;COUNT=4",
        ),
    ),
    CalendarEvent,
)
window = ok(
    list_events.sync(
        client=api,
        calendar_id=calendar.id,
        from_=datetime.datetime(2027, 3, 1, tzinfo=datetime.timezone.utc),
        to=datetime.datetime(2027, 5, 1, tzinfo=datetime.timezone.utc),
    ),
    ListEventsResult,
)
out["occurrences"] = sorted(
    e.start_at.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ") for e in window.data
)

# Its feed by token, read without an API key, as a calendar app would.
feed_url = ok(create_calendar_feed_token.sync(calendar.id, client=api), object).feed_url
token = feed_url.split("token=", 1)[1]
anonymous = Client(base_url=base_url, raise_on_unexpected_status=True)
feed = stream_calendar_feed.sync(calendar.id, client=anonymous, token=token)
out["feed"] = feed if isinstance(feed, str) else repr(feed)
wrong = stream_calendar_feed.sync_detailed(calendar.id, client=anonymous, token="not-the-token")
out["wrong_token_status"] = int(wrong.status_code)

print(json.dumps(out))
