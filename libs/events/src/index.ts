export { recordEvent, OUTBOX_MIGRATIONS, type EventInput } from './outbox.js';
