/**
 * Which thread takes a step. Piscina's default balancer gives every abortable task a thread of
 * its own, and every step is abortable here (its kill switch), so `tasksPerThread` would never
 * apply. This one shares: the least busy thread under `tasksPerThread`. The cost is stated in
 * StepPool's `#cancel`: terminating a thread for a stuck handler fails the other steps on it as
 * `worker_crashed` (retryable).
 *
 * It also tells the pool which thread each step went to (`placed`, by the step's number, which
 * rides on the task under Piscina's queue-options symbol: structured cloning drops it, so the
 * worker never sees it), also when the step waited in Piscina's queue while a thread was
 * replaced. A stuck step's thread is known from then on, without a message from the worker for
 * every step: one of those cost w1 ~4 % of its steps a second (median of six pairs), a wake-up of
 * the main thread and a socket write more per step.
 */
import { type Piscina, queueOptionsSymbol } from "piscina";

export type LoadBalancer = NonNullable<NonNullable<ConstructorParameters<typeof Piscina>[0]>["loadBalancer"]>;
type PoolThread = Parameters<LoadBalancer>[1][number];

/** What a task carries for the balancer: the step's number in the pool, under Piscina's `queueOptionsSymbol`. */
export interface Placement {
  readonly [queueOptionsSymbol]: { seq: number };
}

export function sharedThreads(tasksPerThread: number, placed: (seq: number, thread: number) => void): LoadBalancer {
  return (task, workers) => {
    let best: PoolThread | null = null;
    for (const w of workers) if (w.currentUsage < tasksPerThread && (!best || w.currentUsage < best.currentUsage)) best = w;
    const placement = (task as Partial<Placement>)[queueOptionsSymbol];
    if (best && placement) placed(placement.seq, best.id);
    return best;
  };
}
