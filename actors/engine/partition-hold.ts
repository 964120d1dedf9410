/**
 * Whether this node still holds the partition of a run whose attempt it executes. An attempt runs
 * under its run's partition: once the partition can be another node's (this node's liveness record
 * lapsed, or it let the partition go), the new owner's recovery fails the attempt and runs it again.
 * Its result is refused then (the fences hold), but what it does before reporting is not: so an
 * attempt starts its handler and sends a tool call only while the hold stands (the soak found a
 * node SIGSTOPped with an offer in hand starting the handler once continued, and sending a charge
 * its run had already made again elsewhere).
 */

/** What the hold reads of the node: its liveness lease and the partitions it serves. */
export interface HoldSource {
  /** Monotonic ms until which no other node can have taken this node's partitions (see `Membership.holdsUntil`). */
  holdsUntil(): number;
  /** How many times this node's liveness record lapsed. */
  lapses(): number;
  /** Called after each renewal of the liveness record settles. */
  onRenewal(listener: () => void): () => void;
  /** The epoch this node serves `partition` under (undefined: it does not serve it). */
  epochOf(partition: number): number | undefined;
  partitionOfRun(run: string): number;
  monotonic(): number;
}

/** The hold an attempt started under: its run's partition, that partition's epoch then, and the lease's lapses then. */
export interface HoldToken {
  partition: number;
  epoch: number;
  lapses: number;
}

export class PartitionHold {
  /**
   * @param marginMs how long before the lease's end the hold is no longer trusted: time for the
   *   start or the call to leave this process, and for the clocks.
   * @param maxWaitMs how long a stale hold waits for renewals to tell before it is given up.
   */
  constructor(
    private readonly source: HoldSource,
    private readonly timing: { marginMs: number; maxWaitMs: number },
  ) {}

  /** The hold of `run`'s partition as it stands now (undefined: this node does not serve it). */
  take(run: string): HoldToken | undefined {
    const partition = this.source.partitionOfRun(run);
    const epoch = this.source.epochOf(partition);
    return epoch === undefined ? undefined : { partition, epoch, lapses: this.source.lapses() };
  }

  /** Monotonic ms until which `token`'s hold is trusted, as known now (0: it is not). */
  until(token: HoldToken): number {
    const { source } = this;
    if (source.lapses() !== token.lapses || source.epochOf(token.partition) !== token.epoch) return 0;
    return source.holdsUntil() - this.timing.marginMs;
  }

  /** The wall-clock ms (`Date.now()`'s, which a worker thread reads too) past which an attempt under `token` must not start (0: it must not). */
  startBy(token: HoldToken | undefined): number {
    const until = token ? this.until(token) : 0;
    return until === 0 ? 0 : Date.now() + (until - this.source.monotonic());
  }

  /**
   * Whether `token`'s hold stands now: at once while the lease is fresh; when it is not (a busy or
   * paused process), after the next renewals tell, so a node that only fell behind goes on and one
   * whose lease lapsed (or whose partition moved) stops.
   */
  held(token: HoldToken | undefined): boolean | Promise<boolean> {
    if (!token) return false;
    const until = this.until(token);
    if (until === 0) return false;
    if (this.source.monotonic() < until) return true;
    return new Promise<boolean>((resolve) => {
      const finish = (answer: boolean) => {
        clearTimeout(timer);
        stop();
        resolve(answer);
      };
      const timer = setTimeout(() => finish(false), this.timing.maxWaitMs);
      const stop = this.source.onRenewal(() => {
        const now = this.until(token);
        if (now === 0) finish(false);
        else if (this.source.monotonic() < now) finish(true);
      });
    });
  }
}
