/**
 * Spin-then-park for a node's event loop. A step waits on two sub-millisecond answers in turn (its
 * write's ack, its handler's result); parked in epoll meanwhile, the thread sleeps and wakes to cold
 * caches. So while an answer is expected soon the loop polls (a chain of `setImmediate`) instead.
 * It spins only when recent answers came soon, while few are outstanding (more keep the loop busy by
 * themselves) and for a short window: a slow handler or a disk sync is waited for parked, and an
 * idle node never spins.
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
