// Polling with a deadline: the only place in the harness that sleeps, and only between polls.

export interface WaitForOptions {
  timeoutMs: number;
  intervalMs?: number;
  /** What is being waited for; goes into the timeout error. */
  describe: string;
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const TIMED_OUT = Symbol("timed out");

/** Resolves with the first truthy value `predicate` returns. Thrown errors count as "not yet";
 *  the last one is reported if the deadline passes. A predicate that hangs is cut off at the
 *  deadline rather than stretching it. */
export async function waitFor<T>(predicate: () => T | Promise<T>, { timeoutMs, intervalMs = 25, describe }: WaitForOptions): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  let attempts = 0;
  for (;;) {
    attempts++;
    const remaining = deadline - Date.now();
    let timer: NodeJS.Timeout | undefined;
    try {
      const value = await Promise.race([
        Promise.resolve().then(predicate),
        new Promise<typeof TIMED_OUT>((resolve) => {
          timer = setTimeout(() => resolve(TIMED_OUT), Math.max(remaining, 0));
        }),
      ]);
      if (value !== TIMED_OUT && value) return value as NonNullable<T>;
    } catch (err) {
      lastError = err;
    } finally {
      clearTimeout(timer);
    }
    if (Date.now() + intervalMs > deadline) break;
    await delay(intervalMs);
  }
  const cause = lastError === undefined ? "" : `; last error: ${errorText(lastError)}`;
  throw new Error(`timed out after ${timeoutMs} ms (${attempts} attempts) waiting for ${describe}${cause}`, { cause: lastError });
}

export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}
