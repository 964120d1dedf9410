/** Time and identity sources are injected so that decisions can be replayed and tested. */
export interface Clock {
  /** Wall-clock milliseconds since the epoch; what machines receive as `now`. */
  now(): number;
  /** Monotonic milliseconds, for deadlines and latencies. */
  monotonic(): number;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
};
