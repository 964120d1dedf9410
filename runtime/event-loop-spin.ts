/**
 * Spin-then-park for a node's event loop. A step run alone waits on two answers in turn: its
 * write's acknowledgement from the server and its handler's result from a pool thread, each a
 * fraction of a millisecond. Parked in epoll meanwhile, the loop's thread sleeps; woken, it
 * finds its caches cold. On a 2-core VM a step one at a time cost ~790 µs of main-thread CPU
 * (its run's start and end included) against ~250 µs at 32 in flight (w1, 2026-12-05), the same
 * code slower everywhere. While an
 * answer is expected soon, the loop polls instead of sleeping: a chain of `setImmediate`
 * callbacks makes libuv check its sockets without blocking.
 *
 * It spins only for answers expected soon (the last answer on the same connection, or from the
 * same pool, came soon), while they are few (more keep the loop busy by themselves), and no
 * longer than a window after the last such request: a handler that runs for seconds, or a
 * write the server syncs to disk, is waited for parked, and an idle node never spins.
 */
export interface SpinPolicy {
  /** How long after the last request the loop keeps polling; 0 never spins. */
  windowMs: number;
  /** Only an answer expected this soon is polled for. */
  soonMs: number;
  /** Above this many outstanding answers the loop parks as usual. */
  maxOutstanding: number;
}

export const SPIN_OFF: SpinPolicy = { windowMs: 0, soonMs: 0, maxOutstanding: 0 };

export interface SpinScheduler {
  now(): number;
  /** Runs `tick` on the loop's next turn, after it has polled for I/O without blocking. */
  later(tick: () => void): void;
}

const eventLoop: SpinScheduler = { now: () => performance.now(), later: (tick) => void setImmediate(tick) };

export class EventLoopSpin {
  #policy: SpinPolicy;
  readonly #sources = new Set<() => number>();
  #until = 0;
  #spinning = false;
  #turns = 0;

  constructor(
    policy: SpinPolicy,
    private readonly scheduler: SpinScheduler = eventLoop,
  ) {
    this.#policy = policy;
  }

  get policy(): SpinPolicy {
    return this.#policy;
  }

  /** Turns the loop spent polling (metrics, tests). */
  get turns(): number {
    return this.#turns;
  }

  /** Whether the loop is polling now. */
  get spinning(): boolean {
    return this.#spinning;
  }

  configure(policy: SpinPolicy): void {
    this.#policy = policy;
  }

  /** How many counts of outstanding answers are registered (tests: every connection and pool removes its own). */
  get sources(): number {
    return this.#sources.size;
  }

  /** A count of answers its owner waits for (requests on a connection, steps on pool threads); returns its removal. */
  register(outstanding: () => number): () => void {
    this.#sources.add(outstanding);
    return () => void this.#sources.delete(outstanding);
  }

  /**
   * A request went out whose answer is expected within `withinMs` (the last one's time, say):
   * if that is soon, poll for it a window long. A later answer (a handler that runs long, a
   * write the server syncs to disk) is waited for parked: spinning would only take a core from
   * whoever computes it, and save a wake-up worth little beside the wait.
   */
  expectAnswer(withinMs = 0): void {
    if (this.#policy.windowMs <= 0) return;
    const now = this.scheduler.now();
    // What the loop waits for next comes late: a spin under way ends at its next turn.
    if (withinMs > this.#policy.soonMs) return void (this.#until = Math.min(this.#until, now));
    this.#until = now + this.#policy.windowMs;
    if (this.#spinning) return;
    this.#spinning = true;
    this.scheduler.later(this.#tick);
  }

  #outstanding(): number {
    let n = 0;
    for (const count of this.#sources) n += count();
    return n;
  }

  readonly #tick = (): void => {
    const n = this.#outstanding();
    if (n > 0 && n <= this.#policy.maxOutstanding && this.scheduler.now() < this.#until) {
      this.#turns++;
      this.scheduler.later(this.#tick);
    } else this.#spinning = false;
  };
}

/** The process's event loop has one spin, shared by every connection and pool in it; off until a node's process configures it. */
export const eventLoopSpin = new EventLoopSpin(SPIN_OFF);
