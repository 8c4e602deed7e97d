export { createNotesTasksService, type NotesTasksConfig, type RunningService } from './app.js';
