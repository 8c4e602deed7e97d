/**
 * Python's icalendar as a second, independent iCalendar parser for the feed tests: installed into
 * a virtualenv under .cache/ on first use (PyPI), pinned, and run on the feed's text.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const VERSION = '7.3.0';
const VENV = fileURLToPath(new URL(`../../../../.cache/python-icalendar-${VERSION}/`, import.meta.url));

/** One VEVENT as Python's icalendar reads it: date-times as UTC ISO strings (TZIDs resolved), dates as YYYY-MM-DD. */
export interface PythonEvent {
  uid: string;
  summary: string;
  start: string;
  end: string;
  rrule: string | null;
  exdates: string[];
  recurrence_id: string | null;
}

const SCRIPT = `
import sys, json, datetime
from icalendar import Calendar

def iso(value):
    d = value.dt
    if isinstance(d, datetime.datetime):
        return d.astimezone(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ') if d.tzinfo else d.isoformat()
    return d.isoformat()

calendar = Calendar.from_ical(sys.stdin.read())
out = []
for ev in calendar.walk('VEVENT'):
    exdate = ev.get('EXDATE')
    exdates = [] if exdate is None else [iso(d) for e in (exdate if isinstance(exdate, list) else [exdate]) for d in e.dts]
    out.append({
        'uid': str(ev['UID']),
        'summary': str(ev['SUMMARY']),
        'start': iso(ev['DTSTART']),
        'end': iso(ev['DTEND']),
        'rrule': ev['RRULE'].to_ical().decode() if 'RRULE' in ev else None,
        'exdates': exdates,
        'recurrence_id': iso(ev['RECURRENCE-ID']) if 'RECURRENCE-ID' in ev else None,
    })
print(json.dumps(out))
`;

function run(command: string, args: string[], input?: string): string {
  const result = spawnSync(command, args, { input, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${result.stderr.slice(0, 2000)}`);
  return result.stdout;
}

/** Whether python3 is on this machine (CI machines have it: the chart checks use it too). */
export function hasPython(): boolean {
  return spawnSync('python3', ['--version']).status === 0;
}

/** The feed's VEVENTs as Python's icalendar parses them (throws when it cannot). */
export function parseWithPythonIcalendar(text: string): PythonEvent[] {
  const python = `${VENV}bin/python`;
  // Installed once; a run stopped halfway is completed by the next.
  if (!existsSync(python) || spawnSync(python, ['-c', 'import icalendar']).status !== 0) {
    if (!existsSync(python)) run('python3', ['-m', 'venv', VENV]);
    run(`${VENV}bin/pip`, ['install', '--quiet', `icalendar==${VERSION}`]);
  }
  return JSON.parse(run(python, ['-c', SCRIPT], text)) as PythonEvent[];
}
