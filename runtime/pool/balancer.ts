/**
 * Which thread takes which steps. Piscina's default balancer counts tasks, not steps, and gives every
 * abortable task its own thread; here a thread takes batches while it runs fewer than
 * `tasksPerThread` steps. It also tells the pool where each batch went (`placed`), so a stuck step's
 * thread is known without a message per step from the worker.
 */
import { type Piscina, queueOptionsSymbol } from "piscina";

export type LoadBalancer = NonNullable<NonNullable<ConstructorParameters<typeof Piscina>[0]>["loadBalancer"]>;
type PoolThread = Parameters<LoadBalancer>[1][number];

/** What a batch carries for the balancer: its steps' numbers, and the thread the pool chose for it. */
export interface Placement {
  readonly [queueOptionsSymbol]: { seqs: readonly number[]; thread: number | undefined };
}

/** The pool's side of placement: steps running on a thread, and where a batch went. */
export interface StepsPerThread {
  on(thread: number): number;
  placed(seqs: readonly number[], thread: number): void;
}

/**
 * Splits `count` steps between threads running `load(thread)` steps each, at most
 * `tasksPerThread` a thread: each step to the least loaded thread with room. Returns how many
 * each thread takes (threads without room take none); those left over are the count less the sum.
 */
export function spread(count: number, threads: readonly number[], load: (thread: number) => number, tasksPerThread: number): Map<number, number> {
  const taken = new Map<number, number>();
  for (let i = 0; i < count; i++) {
    let best: number | undefined;
    let bestLoad = tasksPerThread;
    for (const t of threads) {
      const l = load(t) + (taken.get(t) ?? 0);
      if (l < bestLoad) {
        best = t;
        bestLoad = l;
      }
    }
    if (best === undefined) break;
    taken.set(best, (taken.get(best) ?? 0) + 1);
  }
  return taken;
}

export function sharedThreads(tasksPerThread: number, steps: StepsPerThread): LoadBalancer {
  return (task, workers) => {
    const placement = (task as Partial<Placement>)[queueOptionsSymbol];
    // Not a batch (the start-up probes): the least busy thread by tasks.
    if (!placement) {
      let best: PoolThread | null = null;
      for (const w of workers) if (w.currentUsage < tasksPerThread && (!best || w.currentUsage < best.currentUsage)) best = w;
      return best;
    }
    const size = placement.seqs.length;
    let best: PoolThread | null = null;
    let bestLoad = Infinity;
    for (const w of workers) {
      const load = steps.on(w.id);
      if (load + size > tasksPerThread && load > 0) continue;
      if (w.id === placement.thread) {
        best = w;
        break;
      }
      if (load < bestLoad) {
        best = w;
        bestLoad = load;
      }
    }
    if (best) steps.placed(placement.seqs, best.id);
    return best;
  };
}
