import {
  createdSchedule,
  laneFor,
  nextDue,
  pausedSchedule,
  replacedSchedule,
  resumedSchedule,
  validateAgainstSchema,
  type ScheduleSpec,
  type ScheduleState,
} from "../../machines/index.js";
import { jsonBytes, RunwayFault } from "../../runtime/index.js";
import type { DefinitionStore } from "../../actors/index.js";
import { isRefusal, timingOf } from "./cron.js";
import { scheduleKey, type ScheduleRecord, type ScheduleStore, type StoredSchedule } from "./store.js";

/** The most schedules one tenant keeps (every node holds them all in memory to know when to look). */
export const MAX_SCHEDULES_PER_TENANT = 1_000;
/** A schedule's input is a run's input: the same bound. */
const MAX_INPUT_BYTES = 32 * 1024;
/** Writes lost to a concurrent writer before giving up (each loser reads and decides again). */
const ATTEMPTS = 5;

/** The answers of `schedules.*`. */
export type ScheduleAnswer =
  | { outcome: "saved" | "found" | "paused" | "resumed"; schedule: ScheduleView }
  | { outcome: "ok"; schedules: ScheduleView[] }
  | { outcome: "deleted" }
  | { outcome: "schedule_not_found" | "definition_not_found" | "schedule_limit_reached" }
  | { outcome: "definition_not_published" | "invalid_cron" | "unknown_time_zone" | "invalid_input" | "lane_not_allowed"; reason: string }
  | { outcome: "input_too_large"; bytes: number; limit: number };

/** A schedule as the API shows it: its spec, and where its firings stand (instants in epoch ms). */
export type ScheduleView = ScheduleSpec & {
  created_at: number;
  updated_at: number;
  next_due_at: number | null;
  fired: number;
  last: ScheduleState["last"] | null;
  skipped_through: number | null;
};

export function scheduleView(record: ScheduleState, now: number): ScheduleView {
  const timing = timingOf(record.spec, record.anchor);
  return {
    ...record.spec,
    created_at: record.created_at,
    updated_at: record.updated_at,
    next_due_at: isRefusal(timing) ? null : (nextDue(record, now, timing) ?? null),
    fired: record.fired,
    last: record.last ?? null,
    skipped_through: record.skipped_through ?? null,
  };
}

/**
 * `schedules.put|list|get|delete|pause|resume`: a tenant's schedules, checked when put (a cron
 * expression croner reads, a time zone this node knows, a published definition the input fits,
 * a lane its tenant allows the `schedule` source) and changed by revision-checked writes.
 */
export class ScheduleService {
  constructor(
    private readonly deps: {
      store: ScheduleStore;
      definitions: DefinitionStore;
      /** The tenant's interactive sources (its policy), when this node has read it. */
      interactiveSources(tenant: string): readonly string[] | undefined;
      now(): number;
    },
  ) {}

  /** Creates or replaces a schedule (the spec as the API's schema parsed it). */
  async put(tenant: string, spec: ScheduleSpec): Promise<ScheduleAnswer> {
    const timing = timingOf(spec, 0);
    if (isRefusal(timing)) return timing;
    const input = spec.input ?? {};
    const bytes = jsonBytes(input);
    if (bytes > MAX_INPUT_BYTES) return { outcome: "input_too_large", bytes, limit: MAX_INPUT_BYTES };
    const lane = laneFor(spec.lane, "schedule", this.deps.interactiveSources(tenant));
    if (!lane.ok) return { outcome: "lane_not_allowed", reason: lane.reason };
    const resolved = await this.deps.definitions.resolve(tenant, spec.definition);
    if (resolved.outcome !== "found") return resolved;
    if (resolved.plan.input_schema) {
      const checked = validateAgainstSchema(resolved.plan.input_schema, input);
      if (!checked.ok) return { outcome: "invalid_input", reason: checked.errors.map((e) => `schedule.input${e.path}: ${e.message}`).join("; ") };
    }
    const key = scheduleKey(tenant, spec.name);
    return this.change(key, async (now, current) => {
      if (!current && (await this.deps.store.keysOf(tenant)).length >= MAX_SCHEDULES_PER_TENANT) return { outcome: "schedule_limit_reached" };
      return { state: current ? replacedSchedule(current.record, spec, now) : createdSchedule(spec, now), outcome: "saved" };
    });
  }

  async get(tenant: string, name: string): Promise<ScheduleAnswer> {
    const found = await this.deps.store.read(scheduleKey(tenant, name));
    return found ? { outcome: "found", schedule: scheduleView(found.record, this.deps.now()) } : { outcome: "schedule_not_found" };
  }

  async list(tenant: string): Promise<ScheduleAnswer> {
    const now = this.deps.now();
    const schedules: ScheduleView[] = [];
    for (const key of await this.deps.store.keysOf(tenant)) {
      const found = await this.deps.store.read(key);
      if (found) schedules.push(scheduleView(found.record, now));
    }
    return { outcome: "ok", schedules };
  }

  async delete(tenant: string, name: string): Promise<ScheduleAnswer> {
    const key = scheduleKey(tenant, name);
    for (let i = 0; i < ATTEMPTS; i++) {
      const found = await this.deps.store.read(key);
      if (!found) return { outcome: "schedule_not_found" };
      if ((await this.deps.store.remove(key, found.revision)) === "removed") return { outcome: "deleted" };
    }
    throw new RunwayFault("schedule_contended", `schedule ${key}: delete lost ${ATTEMPTS} races`, { kind: "retryable" });
  }

  pause(tenant: string, name: string): Promise<ScheduleAnswer> {
    return this.change(scheduleKey(tenant, name), async (now, current) =>
      current ? { state: pausedSchedule(current.record, now), outcome: "paused" } : { outcome: "schedule_not_found" },
    );
  }

  resume(tenant: string, name: string): Promise<ScheduleAnswer> {
    return this.change(scheduleKey(tenant, name), async (now, current) =>
      current ? { state: resumedSchedule(current.record, now), outcome: "resumed" } : { outcome: "schedule_not_found" },
    );
  }

  /** Read, decide, write fenced on what was read; a lost race reads and decides again. */
  private async change(
    key: string,
    decide: (now: number, current: StoredSchedule | undefined) => Promise<{ state: ScheduleState; outcome: "saved" | "paused" | "resumed" } | ScheduleAnswer>,
  ): Promise<ScheduleAnswer> {
    const tenant = key.slice(0, key.indexOf("."));
    for (let i = 0; i < ATTEMPTS; i++) {
      const current = await this.deps.store.read(key);
      const now = this.deps.now();
      const decided = await decide(now, current);
      if (!("state" in decided)) return decided;
      const record: ScheduleRecord = { ...decided.state, tenant };
      if (current && decided.state === current.record) return { outcome: decided.outcome, schedule: scheduleView(record, now) };
      const written = await this.deps.store.write(key, record, current?.revision);
      if (written !== "conflict") return { outcome: decided.outcome, schedule: scheduleView(record, now) };
    }
    throw new RunwayFault("schedule_contended", `schedule ${key}: write lost ${ATTEMPTS} races`, { kind: "retryable" });
  }
}
