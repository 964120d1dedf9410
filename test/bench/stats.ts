/** Percentiles over recorded samples (milliseconds), rounded for a JSON line. */
export function percentiles(samples: number[]): { p50: number; p95: number; p99: number; mean: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  const round = (x: number) => Math.round(x * 1000) / 1000;
  const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length);
  return { p50: round(at(0.5)), p95: round(at(0.95)), p99: round(at(0.99)), mean: round(mean) };
}

/** Runs `task(i)` for i in [0, total) with at most `window` in flight. */
export async function windowed(total: number, window: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(window, total) }, async () => {
      while (next < total) await task(next++);
    }),
  );
}

export function progress(message: string): void {
  process.stderr.write(`bench: ${message}\n`);
}
