/**
 * One priority level of a tenant's class: its queued tickets oldest first, (enqueued_at, seq).
 * Immutable, but a view (`head`, `size`) over a backing array versions share, so the two common
 * moves are O(1): pushing at the end (an older version never reads past its own `size`) and
 * leasing the head. Anything else copies; a half-consumed backing array is compacted on the next
 * copy. `deadlines` and `bySeq` let a scan stop at the first ticket it may lease.
 */
export interface QueuedTicketLike {
  readonly ticket: { readonly deadline: number | null; readonly enqueued_at: number; readonly id: string };
  readonly seq: number;
}

export interface Level<Q extends QueuedTicketLike> {
  readonly items: readonly Q[];
  readonly head: number;
  readonly size: number;
  /** Tickets in the level with a deadline. */
  readonly deadlines: number;
  /** Whether `seq` also increases along the level. */
  readonly bySeq: boolean;
}

const EMPTY: Level<never> = Object.freeze({ items: Object.freeze([]), head: 0, size: 0, deadlines: 0, bySeq: true });

export function emptyLevel<Q extends QueuedTicketLike>(): Level<Q> {
  return EMPTY;
}

export function at<Q extends QueuedTicketLike>(level: Level<Q>, i: number): Q | undefined {
  return i >= 0 && i < level.size ? level.items[level.head + i] : undefined;
}

/** The level's tickets, oldest first (a copy). */
export function ticketsOf<Q extends QueuedTicketLike>(level: Level<Q>): Q[] {
  return level.items.slice(level.head, level.head + level.size);
}

export function indexOf<Q extends QueuedTicketLike>(level: Level<Q>, id: string): number {
  for (let i = 0; i < level.size; i++) if (level.items[level.head + i]!.ticket.id === id) return i;
  return -1;
}

function made<Q extends QueuedTicketLike>(items: readonly Q[], head: number, size: number, deadlines: number, bySeq: boolean): Level<Q> {
  // An emptied level forgets its backing array (and, with nothing in it, is in seq order again).
  return size === 0 ? EMPTY : { items, head, size, deadlines, bySeq };
}

const hasDeadline = (q: QueuedTicketLike): number => (q.ticket.deadline !== null ? 1 : 0);

/** A backing array to push onto: the level's own when no later version pushed past its end and little of it is consumed. */
function pushable<Q extends QueuedTicketLike>(level: Level<Q>): boolean {
  // An empty level (the shared, frozen one) starts a backing array of its own.
  return level.size > 0 && level.items.length === level.head + level.size && level.head <= Math.max(32, level.size);
}

/** `entry` inserted in (enqueued_at, seq) order; its seq is newer than every seq in the level. */
export function inserted<Q extends QueuedTicketLike>(level: Level<Q>, entry: Q): Level<Q> {
  const at = entry.ticket.enqueued_at;
  const last = level.size > 0 ? level.items[level.head + level.size - 1]! : undefined;
  const deadlines = level.deadlines + hasDeadline(entry);
  if (!last || last.ticket.enqueued_at <= at) {
    if (pushable(level)) {
      (level.items as Q[]).push(entry);
      return made(level.items, level.head, level.size + 1, deadlines, level.bySeq);
    }
    const items = ticketsOf(level);
    items.push(entry);
    return made(items, 0, items.length, deadlines, level.bySeq);
  }
  // Older than the youngest here (a ticket offered again keeps its first enqueue time): it goes
  // before tickets with a smaller seq, so seq no longer follows the level.
  let lo = 0;
  let hi = level.size;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (level.items[level.head + mid]!.ticket.enqueued_at <= at) lo = mid + 1;
    else hi = mid;
  }
  const items = ticketsOf(level);
  items.splice(lo, 0, entry);
  return made(items, 0, items.length, deadlines, false);
}

/** The level without its ticket at `i`. */
export function without<Q extends QueuedTicketLike>(level: Level<Q>, i: number): Level<Q> {
  const entry = at(level, i);
  if (!entry) return level;
  const deadlines = level.deadlines - hasDeadline(entry);
  if (i === 0) return made(level.items, level.head + 1, level.size - 1, deadlines, level.bySeq);
  const items = ticketsOf(level);
  items.splice(i, 1);
  return made(items, 0, items.length, deadlines, level.bySeq);
}
