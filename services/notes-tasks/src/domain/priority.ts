export const PRIORITIES = ['none', 'low', 'medium', 'high', 'urgent'] as const;
export type Priority = (typeof PRIORITIES)[number];

const RANK: Record<Priority, number> = { urgent: 0, high: 1, medium: 2, low: 3, none: 4 };

/**
 * A key whose ascending byte order puts the most urgent first, then the manual order:
 * `<rank>-<position as 10 digits>`, rank 0 urgent … 4 none. `1-0000000003` = high, 3rd.
 */
export function priorityKey(priority: Priority, position: number): string {
  return `${RANK[priority]}-${String(position).padStart(10, '0')}`;
}
