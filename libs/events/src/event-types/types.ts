/** One domain event type as GET /webhook-event-types lists it. */
export interface EventType {
  /** `<resource_type>.<verb>` */
  name: string;
  description: string;
}
