import { firedSchedule, firingPlan, wakeAt, type FiringResult } from "../../machines/index.js";
import type { Clock, Logger } from "../../runtime/index.js";
import type { StartRunRequest } from "../api/schemas.js";
import { isRefusal, timingOf } from "./cron.js";
import type { ScheduleRecord, ScheduleStore } from "./store.js";

/** The source of every firing's start key (`schedule:<name>`), and the source its lane is decided for. */
export const SCHEDULE_SOURCE = "schedule";

/**
 * A firing's start: the key is (source `schedule:<name>`, delivery id the due time in ISO 8601),
 * so one due time of one schedule is one run, whoever starts it and however often.
 */
export function firingStart(record: ScheduleRecord, due: number): StartRunRequest {
  const { spec } = record;
  return {
    definition: spec.definition,
    input: spec.input ?? {},
    start_key: { source: `${SCHEDULE_SOURCE}:${spec.name}`, delivery_id: new Date(due).toISOString() },
    source: SCHEDULE_SOURCE,
    ...(spec.lane ? { lane: spec.lane } : {}),
    ...(spec.project ? { project: spec.project } : {}),
  };
}

/** What one pass did, for tests and metrics. */
export interface FiringReport {
  at: number;
  /** Firings started (or found started by their key), by start answer. */
  started: Record<string, number>;
  /** Schedules whose look failed (a fault): tried again next pass. */
  errors: number;
}

/** How long the loop sleeps at most: how soon it notices a partition it now owns. */
const IDLE_MS = 1_000;
/** Fenced writes lost in one look before it gives up until the next pass. */
const ATTEMPTS = 5;

/**
 * Starts the firings of the schedules whose key's partition this node owns (one owner per
 * partition, so normally one node per schedule). Every node watches the whole bucket to know
 * when to look; a look reads the record, plans with the pure `firingPlan`, starts the chosen
 * firings, then moves the cursor with a write fenced on the revision it read.
 *
 * Exactly one run per due time, whatever crashes or overlaps: the start key is the due time, so a
 * firing started twice (a crash between the starts and the write, two owners during a hand-off,
 * a lost write race) answers `duplicate` the second time. No firing is lost: the cursor moves
 * only after its starts were answered, so a node that dies before leaves it to the partition's
 * next owner, which plans the same due times (under the missed policy, if it comes late).
 */
export class ScheduleFirer {
  private readonly wake = new Map<string, number | undefined>();
  private watch: { stop(): void } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<FiringReport> | undefined;
  private stopped = false;

  constructor(
    private readonly deps: {
      store: ScheduleStore;
      /** This node owns the schedule at `key` (the owner of the key's partition). */
      owns(key: string): boolean;
      start(tenant: string, request: StartRunRequest): Promise<{ outcome: string; run?: unknown }>;
      clock: Clock;
      logger: Logger;
      graceMs?: number;
    },
  ) {}

  /** Watches the bucket and looks whenever a schedule it owns is due (at least every second). */
  async start(): Promise<void> {
    await this.follow();
    this.soon(0);
  }

  /** Every key's last value, then each change; a watch that ends (the connection lost) starts again and replays them. */
  private async follow(): Promise<void> {
    const iterator = await (await this.deps.store.bucket()).watch({ key: ">" });
    this.watch = iterator;
    void (async () => {
      for await (const e of iterator) {
        if (e.operation !== "PUT") this.wake.delete(e.key);
        else this.learn(e.key, e.json<ScheduleRecord>());
        this.soon(0);
      }
    })()
      .catch((err: unknown) => this.deps.logger.warn("schedules: watch ended", { error: String(err) }))
      .finally(() => {
        if (this.stopped) return;
        setTimeout(() => void this.follow().catch((err: unknown) => this.deps.logger.warn("schedules: cannot watch", { error: String(err) })), IDLE_MS).unref();
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.watch?.stop();
    await this.running?.catch(() => undefined);
  }

  /** When to look at `key` next; after a look at `now` that found nothing due, never at or before `now` again. */
  private learn(key: string, record: ScheduleRecord, now?: number): void {
    const timing = timingOf(record.spec, record.anchor);
    if (isRefusal(timing)) return void this.wake.set(key, undefined);
    const at = wakeAt(record, timing);
    this.wake.set(key, now !== undefined && at !== undefined && at <= now ? timing.next(now) : at);
  }

  private soon(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.pass().catch((err: unknown) => this.deps.logger.error("schedules: pass failed", { error: String(err) })), ms);
    this.timer.unref();
  }

  /** One pass at `now` over the owned schedules that are due, after the pass in progress (passes never overlap). */
  async pass(now = this.deps.clock.now()): Promise<FiringReport> {
    while (this.running) await this.running.catch(() => undefined);
    const running = this.look(now).finally(() => {
      this.running = undefined;
      this.rearm();
    });
    this.running = running;
    return running;
  }

  private rearm(): void {
    const now = this.deps.clock.now();
    let earliest = now + IDLE_MS;
    for (const [key, at] of this.wake) if (at !== undefined && at < earliest && this.deps.owns(key)) earliest = at;
    this.soon(Math.max(0, earliest - now));
  }

  private async look(now: number): Promise<FiringReport> {
    const report: FiringReport = { at: now, started: {}, errors: 0 };
    for (const [key, at] of [...this.wake]) {
      if (this.stopped) break;
      if (at === undefined || at > now || !this.deps.owns(key)) continue;
      try {
        await this.fire(key, now, report);
      } catch (err) {
        report.errors++;
        // Looked at again after a pause, not in a loop: a store or a start that failed may need a moment.
        this.wake.set(key, now + IDLE_MS);
        this.deps.logger.warn("schedules: look failed", { key, error: String(err) });
      }
    }
    return report;
  }

  /** Plans, starts and records one schedule's due firings. */
  private async fire(key: string, now: number, report: FiringReport): Promise<void> {
    for (let i = 0; i < ATTEMPTS; i++) {
      const stored = await this.deps.store.read(key);
      if (!stored) return void this.wake.delete(key);
      const { record } = stored;
      const timing = timingOf(record.spec, record.anchor);
      if (isRefusal(timing)) return void this.wake.set(key, undefined);
      const plan = firingPlan(record, now, timing, this.deps.graceMs);
      if (plan.cursor === record.cursor) return this.learn(key, record, now);
      const results: FiringResult[] = [];
      for (const due of plan.start) {
        const answer = await this.deps.start(record.tenant, firingStart(record, due));
        const runId = (answer.run as { id?: unknown } | undefined)?.id;
        results.push({ due, outcome: answer.outcome, ...(typeof runId === "string" ? { run_id: runId } : {}) });
        report.started[answer.outcome] = (report.started[answer.outcome] ?? 0) + 1;
        if (answer.outcome !== "started" && answer.outcome !== "duplicate")
          this.deps.logger.warn("schedules: a firing was refused", { key, due: new Date(due).toISOString(), outcome: answer.outcome });
      }
      const next: ScheduleRecord = { ...firedSchedule(record, plan, results, now), tenant: record.tenant };
      const written = await this.deps.store.write(key, next, stored.revision);
      if (written !== "conflict") return this.learn(key, next, now);
      // Someone else wrote it (a put, a pause, another owner's look): read and plan again; starts made again answer `duplicate`.
    }
  }
}
