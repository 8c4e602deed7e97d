export { createCalendarService, type CalendarConfig, type RunningService } from './app.js';
export * from './domain/recurrence.js';
