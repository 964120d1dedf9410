import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { initialTransition, transition, type SnapshotFrom } from "xstate";
import {
  DAY_MS,
  DEFAULT_ENDED_RETENTION_MS,
  MAX_QUEUED,
  PROMOTE_BATCH,
  TENANT_COMMANDS,
  TENANT_STATES,
  TENANT_TRANSITIONS,
  TenantCommandSchema,
  applyTenantCommand,
  auditSubject,
  gatherFacts,
  missingFacts,
  nextUtcDay,
  tenantMachine,
  tenantView,
  utcDay,
  withGatheredFacts,
  type TenantCommand,
  type MembershipReader,
  type TenantCommandType,
  type TenantSettingsPatch,
  type TenantState,
} from "../../machines/tenant/index.js";
import { actorRecordCodec } from "../../runtime/index.js";
import { deliver, MemoryMembership, tenantDriver } from "./tenant-twin.js";

type Snap = SnapshotFrom<typeof tenantMachine>;

const T0 = Date.UTC(2025, 0, 15, 12);
const TENANT = "acme";

/** A tenant driven through its twin store (`tenant-twin.ts`); `null`: not created. */
const tenant = (settings?: TenantSettingsPatch | null) =>
  tenantDriver(TENANT, T0, settings === undefined ? undefined : (settings as Record<string, unknown> | null));

/** A tenant in `state` with one run (`r0`) admitted while it was active, and its store. */
function tenantIn(state: TenantState): { snap: Snap; store: MemoryMembership } {
  const d = tenant(state === "new" ? null : undefined);
  if (state !== "new") d.admit("r0");
  if (state === "killed") d.send({ type: "tenant.kill", reason: "abuse" });
  if (state === "draining") d.send({ type: "tenant.drain", reason: "migration" });
  expect(d.snap.value).toBe(state);
  return { snap: d.snap, store: d.store };
}

const SAMPLE: Record<TenantCommandType, TenantCommand> = {
  "tenant.create": { type: "tenant.create", settings: { weight: 2 } },
  "tenant.put": { type: "tenant.put", settings: { day_cap: 50 } },
  "tenant.kill": { type: "tenant.kill", reason: "abuse" },
  "tenant.drain": { type: "tenant.drain", reason: "maintenance" },
  "tenant.resume": { type: "tenant.resume" },
  "tenant.admit_run": { type: "tenant.admit_run", run_id: "r9", project: "p" },
  "tenant.run_ended": { type: "tenant.run_ended", run_id: "r0", project: "p" },
  "tenant.recheck": { type: "tenant.recheck", run_id: "r0" },
  "tenant.admit_expansion": { type: "tenant.admit_expansion", run_id: "r0", node: "m", children: 10, depth: 1, total_steps: 11, estimated_cost: 11 },
  "tenant.release_expansion": { type: "tenant.release_expansion", run_id: "r0", node: "m" },
  "tenant.promote": { type: "tenant.promote" },
  "tenant.migrate": { type: "tenant.migrate" },
};

/** The rules, written out independently of the machine's table: the answer each cell gives. */
const live = (admit: string) => ({
  "tenant.create": "exists",
  "tenant.put": "updated",
  "tenant.kill": "killed",
  "tenant.drain": "draining",
  "tenant.resume": "active",
  "tenant.admit_run": admit,
  "tenant.run_ended": "ended",
  "tenant.recheck": "admitted",
  "tenant.admit_expansion": "expansion_admitted",
  "tenant.release_expansion": "not_held",
  "tenant.promote": "promoted",
  "tenant.migrate": "migrated",
});
const OUTCOME: Record<TenantState, Partial<Record<TenantCommandType, string>>> = {
  new: { "tenant.create": "created" },
  active: live("admitted"),
  draining: live("tenant_draining"),
  killed: live("tenant_killed"),
};

describe("the tenant actor's machine: every (state × command) cell", () => {
  for (const state of TENANT_STATES) {
    for (const command of TENANT_COMMANDS) {
      const to = TENANT_TRANSITIONS[state][command];
      const expected = OUTCOME[state][command];
      it(`${state} × ${command} → ${to ? `${to} (${expected})` : "refused by the host"}`, () => {
        expect(TenantCommandSchema.safeParse(SAMPLE[command]).success).toBe(true);
        expect(to === undefined).toBe(expected === undefined);
        const { snap: before, store } = tenantIn(state);
        const r = deliver(before, SAMPLE[command], T0 + 1_000, store, false);
        if (to === undefined) {
          expect(r.refused).toBe(true);
          expect(r.answer).toEqual({ outcome: "refused", state });
          return;
        }
        expect(r.snap.value).toBe(to);
        expect(r.snap.context.state).toBe(to);
        expect(r.answer.outcome).toBe(expected);
        const changesTenant = command === "tenant.put" || (command === "tenant.create" && state === "new") || (to !== state && command !== "tenant.admit_run");
        expect(r.audits.length).toBe(changesTenant ? 1 : 0);
        for (const a of r.audits) expect(a).toMatchObject({ type: "runway.publish", subject: auditSubject(TENANT), data: { tenant: TENANT, at: T0 + 1_000 } });
        if (!["admitted", "ended", "expansion_admitted"].includes(expected!) && !changesTenant) expect(r.snap.context).toBe(before.context);
      });
    }
  }
});

describe("kill, drain and resume", () => {
  it("a killed tenant refuses new admissions with tenant_killed and changes nothing", () => {
    const d = tenant();
    d.admit("a");
    const killed = d.send({ type: "tenant.kill", reason: "abuse" });
    expect(killed.answer).toMatchObject({ outcome: "killed", previous: "active", changed: true });
    expect(killed.audits[0]).toMatchObject({ data: { type: "tenant.state_changed", from: "active", to: "killed", reason: "abuse", active_runs: 1 } });
    const before = d.ctx;
    expect(d.admit("b")).toEqual({ outcome: "tenant_killed", run_id: "b" });
    expect(d.ctx).toBe(before);
    expect(d.ctx.state_reason).toBe("abuse");
    const again = d.send({ type: "tenant.kill", reason: "other" });
    expect(again.answer).toMatchObject({ outcome: "killed", changed: false });
    expect(again.audits).toEqual([]);
    expect(d.ctx.state_reason).toBe("abuse");
  });

  it("a draining tenant refuses with tenant_draining while run_ended still decrements", () => {
    const d = tenant({ project_max_concurrency: { p: 5, q: 5 } });
    d.admit("a");
    d.admit("b", "q");
    d.send({ type: "tenant.drain", reason: "deploy" });
    expect(d.admit("c")).toEqual({ outcome: "tenant_draining", run_id: "c" });
    expect(d.end("a")).toEqual({ outcome: "ended", run_id: "a", active_runs: 1 });
    expect(d.ctx.active_by_project).toEqual({ q: 1 });
    expect(d.end("b")).toMatchObject({ outcome: "ended", active_runs: 0 });
    expect(d.ctx.active_by_project).toEqual({});
  });

  it("resume admits again, from draining and from killed", () => {
    for (const stop of ["tenant.kill", "tenant.drain"] as const) {
      const d = tenant();
      d.send({ type: stop, reason: "x" });
      expect(d.admit("a").outcome).not.toBe("admitted");
      const r = d.send({ type: "tenant.resume" });
      expect(r.answer).toMatchObject({ outcome: "active", changed: true });
      expect(d.ctx.state_reason).toBeNull();
      expect(d.admit("a")).toMatchObject({ outcome: "admitted", duplicate: false });
    }
  });
});

describe("the day cap", () => {
  it("utcDay and nextUtcDay follow UTC days", () => {
    expect(utcDay(0)).toBe("1970-01-01");
    expect(utcDay(Date.UTC(2024, 1, 29, 23, 59, 59, 999))).toBe("2024-02-29");
    expect(utcDay(Date.UTC(2024, 2, 1))).toBe("2024-03-01");
    expect(nextUtcDay(Date.UTC(2024, 1, 29, 5))).toBe(Date.UTC(2024, 2, 1));
    expect(nextUtcDay(Date.UTC(2024, 2, 1))).toBe(Date.UTC(2024, 2, 2));
  });

  it("utcDay answers every instant's own day, asked in any order (it keeps the last day it formatted)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -8.64e15, max: 8.64e15 }), { minLength: 1, maxLength: 50 }), (instants) => {
        for (const now of instants) expect(utcDay(now)).toBe(new Date(now).toISOString().slice(0, 10));
      }),
    );
  });

  it("refuses past the cap and counts again from 0 on the next UTC day", () => {
    const d = tenant({ day_cap: 2 });
    d.admit("a");
    d.admit("b");
    d.end("a");
    d.end("b");
    const before = d.ctx;
    expect(d.admit("c")).toEqual({ outcome: "day_cap_reached", run_id: "c", day: "2025-01-15", day_cap: 2, resets_at: Date.UTC(2025, 0, 16) });
    expect(d.ctx).toBe(before);
    d.at(Date.UTC(2025, 0, 15, 23, 59, 59, 999));
    expect(d.admit("c").outcome).toBe("day_cap_reached");
    d.at(Date.UTC(2025, 0, 16));
    expect(d.admit("c")).toMatchObject({ outcome: "admitted", starts_today: 1 });
    expect(d.ctx.day).toBe("2025-01-16");
    // A node whose clock lags does not move the window back.
    d.at(Date.UTC(2025, 0, 15, 23));
    expect(d.admit("d")).toMatchObject({ outcome: "admitted", starts_today: 2 });
    expect(d.ctx.day).toBe("2025-01-16");
    expect(d.admit("e").outcome).toBe("day_cap_reached");
  });

  it("a start that made no run (`withdrawn`) gives its place under the cap back; a run that ran keeps it; either end counts once", () => {
    const d = tenant({ day_cap: 2 });
    d.admit("a");
    d.admit("b");
    expect(d.admit("c").outcome).toBe("day_cap_reached");
    expect(d.send({ type: "tenant.run_ended", run_id: "b", project: "p", withdrawn: true }).answer).toMatchObject({ outcome: "ended", active_runs: 1 });
    expect(d.ctx.starts_today).toBe(1);
    expect(d.send({ type: "tenant.run_ended", run_id: "b", project: "p", withdrawn: true }).answer).toMatchObject({ outcome: "not_running" });
    expect(d.ctx.starts_today).toBe(1);
    d.end("a");
    expect(d.ctx.starts_today).toBe(1);
    expect(d.admit("c")).toMatchObject({ outcome: "admitted", starts_today: 2 });
  });
});

describe("the day budget (money) is checked at start, before any run exists", () => {
  const admitWith = (d: ReturnType<typeof tenant>, run_id: string, reserve_cents?: number) =>
    d.send({ type: "tenant.admit_run", run_id, project: "p", ...(reserve_cents !== undefined ? { reserve_cents } : {}) }).answer;

  it("spent today plus live reservations plus this run's reservation must fit; an ended run gives its reservation back; a queued run holds one too", () => {
    const d = tenant({ day_budget_cents: 100, run_reservation_cents: 10, max_concurrency: 1 });
    expect(admitWith(d, "a", 60)).toMatchObject({ outcome: "admitted" });
    expect(d.ctx.reserved_cents).toBe(60);
    const before = d.ctx;
    expect(admitWith(d, "b", 50)).toEqual({
      outcome: "budget_exhausted",
      run_id: "b",
      day: "2025-01-15",
      day_budget_cents: 100,
      spent_cents: 0,
      reserved_cents: 60,
      reserve_cents: 50,
      resets_at: Date.UTC(2025, 0, 16),
    });
    expect(d.ctx).toBe(before);
    // No ceiling of its own: the tenant's default reservation; queued behind the cap, it still holds it.
    expect(admitWith(d, "c")).toMatchObject({ outcome: "queued" });
    expect(d.ctx.reserved_cents).toBe(70);
    // A retried admission is the same run: no second reservation.
    expect(admitWith(d, "a", 60)).toMatchObject({ outcome: "admitted", duplicate: true });
    expect(d.ctx.reserved_cents).toBe(70);
    d.end("a");
    expect(d.ctx.reserved_cents).toBe(10);
    d.end("a");
    expect(d.ctx.reserved_cents).toBe(10);
    d.end("c");
    expect(d.ctx.reserved_cents).toBe(0);
  });

  it("what the meter says was spent today counts; a spent budget refuses even a run that reserves nothing; the next UTC day starts afresh", () => {
    const d = tenant({ day_budget_cents: 100 });
    d.store.spent.set("2025-01-15", 100);
    expect(admitWith(d, "a", 0)).toMatchObject({ outcome: "budget_exhausted", spent_cents: 100 });
    d.store.spent.set("2025-01-15", 40);
    expect(admitWith(d, "a", 60)).toMatchObject({ outcome: "admitted" });
    expect(d.store.keys.has("tenant.acme.b.a")).toBe(true);
    // A reservation counts on the day it was made: ending after midnight gives nothing back to the new day.
    d.at(Date.UTC(2025, 0, 16, 0, 0, 1));
    expect(admitWith(d, "b", 100)).toMatchObject({ outcome: "admitted" });
    d.end("a");
    expect(d.ctx.reserved_cents).toBe(100);
    expect(d.store.keys.has("tenant.acme.b.a")).toBe(false);
  });

  it("a view seen on a later UTC day shows that day with no starts and no reservations; seen the same day (or none given), what the record holds", () => {
    const d = tenant({ day_budget_cents: 100 });
    expect(admitWith(d, "a", 60)).toMatchObject({ outcome: "admitted" });
    expect(tenantView(d.ctx)).toMatchObject({ day: "2025-01-15", starts_today: 1, reserved_cents: 60 });
    expect(tenantView(d.ctx, T0 + 1_000)).toMatchObject({ day: "2025-01-15", starts_today: 1, reserved_cents: 60 });
    expect(tenantView(d.ctx, T0 + DAY_MS)).toMatchObject({ day: "2025-01-16", starts_today: 0, reserved_cents: 0, active_runs: 1 });
    // An earlier clock never moves the day back.
    expect(tenantView(d.ctx, T0 - DAY_MS)).toMatchObject({ day: "2025-01-15", starts_today: 1 });
  });

  it("a tenant without a day budget reads no meter and writes no reservation", () => {
    const d = tenant({});
    d.store.spent.set("2025-01-15", 1e9);
    expect(admitWith(d, "a", 60)).toMatchObject({ outcome: "admitted" });
    expect(d.ctx.reserved_cents ?? 0).toBe(0);
    expect([...d.store.keys.keys()].some((k) => k.includes(".b."))).toBe(false);
  });
});

describe("concurrency caps queue instead of refusing", () => {
  it("the tenant cap queues the run (a start today), and the run that ends hands its slot to the oldest queued run", () => {
    const d = tenant({ max_concurrency: 2 });
    d.admit("a");
    d.admit("b", "q");
    expect(d.admit("c")).toEqual({
      outcome: "queued",
      run_id: "c",
      reason: "concurrency_cap_reached",
      project: "p",
      active: 2,
      limit: 2,
      position: 0,
      duplicate: false,
    });
    expect(d.admit("e")).toMatchObject({ outcome: "queued", position: 1 });
    expect(d.ctx.starts_today).toBe(4);
    const before = d.ctx;
    expect(d.admit("c")).toMatchObject({ outcome: "queued", position: 0, duplicate: true });
    expect(d.ctx).toBe(before);
    const ended = d.send({ type: "tenant.run_ended", run_id: "b", project: "q" });
    expect(ended.admitted).toEqual(["c"]);
    expect(ended.effects).toContainEqual({ type: "runway.send", to: { kind: "run", id: "c" }, event: { type: "run.admitted" } });
    expect(d.running()).toEqual({ a: "p", c: "p" });
    expect(d.queued()).toEqual([["e", "p"]]);
    expect(d.admit("c")).toMatchObject({ outcome: "admitted", duplicate: true, active_runs: 2 });
    expect(d.ctx.starts_today).toBe(4);
  });

  it("a project cap queues that project only, and a blocked project does not hold back another", () => {
    const d = tenant({ project_max_concurrency: { p: 1 } });
    d.admit("a", "p");
    expect(d.admit("b", "p")).toEqual({
      outcome: "queued",
      run_id: "b",
      reason: "project_cap_reached",
      project: "p",
      active: 1,
      limit: 1,
      position: 0,
      duplicate: false,
    });
    expect(d.admit("c", "q").outcome).toBe("admitted");
    expect(d.send({ type: "tenant.run_ended", run_id: "a", project: "p" }).admitted).toEqual(["b"]);
    expect(d.ctx.active_by_project).toEqual({ p: 1 });
    expect(d.running()).toEqual({ b: "p", c: "q" });
  });

  it("the oldest queued run that fits starts first, across projects; one held by its project's cap waits without holding back the rest", () => {
    const d = tenant({ max_concurrency: 2, project_max_concurrency: { p: 1 } });
    d.admit("a", "p");
    d.admit("b", "q");
    for (const [run, project] of [
      ["c", "p"],
      ["e", "q"],
      ["f", "z"],
      ["g", "p"],
    ] as const)
      expect(d.admit(run, project).outcome).toBe("queued");
    // b's slot: c is older but p is at its cap; e is the oldest that fits.
    expect(d.send({ type: "tenant.run_ended", run_id: "b", project: "q" }).admitted).toEqual(["e"]);
    // a's slot frees p: c, then nothing else fits under max_concurrency 2.
    expect(d.send({ type: "tenant.run_ended", run_id: "a", project: "p" }).admitted).toEqual(["c"]);
    expect(d.queued()).toEqual([
      ["f", "z"],
      ["g", "p"],
    ]);
    expect(d.send({ type: "tenant.run_ended", run_id: "c", project: "p" }).admitted).toEqual(["f"]);
    expect(d.send({ type: "tenant.run_ended", run_id: "e", project: "q" }).admitted).toEqual(["g"]);
    expect(d.ctx).toMatchObject({ active_runs: 2, queued_runs: 0, lanes: {} });
    expect(d.store.slots()).toEqual({});
  });

  it("a queued run that ends (cancelled while waiting) leaves the queue and frees nothing; the head skips the hole it left", () => {
    const d = tenant({ max_concurrency: 1 });
    d.admit("a");
    d.admit("b");
    d.admit("c");
    d.admit("e");
    const r = d.send({ type: "tenant.run_ended", run_id: "c", project: "p" });
    expect(r.answer).toMatchObject({ outcome: "ended", active_runs: 1 });
    expect(r.admitted).toEqual([]);
    expect(d.queued()).toEqual([
      ["b", "p"],
      ["e", "p"],
    ]);
    expect(d.admit("c")).toMatchObject({ outcome: "admitted", duplicate: true });
    expect(d.send({ type: "tenant.run_ended", run_id: "b", project: "p" }).admitted).toEqual([]);
    expect(d.send({ type: "tenant.run_ended", run_id: "a", project: "p" }).admitted).toEqual(["e"]);
    expect(d.queued()).toEqual([]);
    expect(d.ctx.queued_runs).toBe(0);
  });

  it("raising the cap or resuming starts queued runs; a draining tenant keeps them queued", () => {
    const d = tenant({ max_concurrency: 1 });
    d.admit("a");
    d.admit("b");
    d.admit("c");
    expect(d.send({ type: "tenant.put", settings: { max_concurrency: 2 } }).admitted).toEqual(["b"]);
    d.send({ type: "tenant.drain", reason: "maintenance" });
    expect(d.send({ type: "tenant.run_ended", run_id: "a", project: "p" }).admitted).toEqual([]);
    expect(d.queued()).toEqual([["c", "p"]]);
    expect(d.send({ type: "tenant.resume" }).admitted).toEqual(["c"]);
  });

  it(`one transition starts at most ${PROMOTE_BATCH} queued runs and asks itself (tenant.promote) to start the rest`, () => {
    const d = tenant({ max_concurrency: 1 });
    d.admit("a");
    for (let i = 0; i < 100; i++) d.admit(`q${i}`);
    const raised = d.send({ type: "tenant.put", settings: { max_concurrency: 1_000 } }, false);
    expect(raised.admitted).toHaveLength(PROMOTE_BATCH);
    expect(raised.effects).toContainEqual({ type: "runway.send", to: { kind: "tenant", id: TENANT }, event: { type: "tenant.promote" } });
    const more = d.send({ type: "tenant.promote" });
    expect(more.admitted).toEqual(Array.from({ length: 100 - PROMOTE_BATCH }, (_, i) => `q${i + PROMOTE_BATCH}`));
    expect(d.ctx).toMatchObject({ active_runs: 101, queued_runs: 0 });
  });

  it(`the queue holds ${MAX_QUEUED} runs; one more is refused queue_full and stores nothing`, () => {
    const d = tenant({ max_concurrency: 1 });
    d.admit("a");
    for (let i = 0; i < MAX_QUEUED; i++) expect(d.admit(`q${i}`).outcome).toBe("queued");
    const before = d.ctx;
    expect(d.admit("over")).toEqual({ outcome: "queue_full", run_id: "over", queued: MAX_QUEUED, limit: MAX_QUEUED });
    expect(d.ctx).toBe(before);
    expect(d.store.running()).toEqual({ a: "p" });
  });

  it("a project that gains a cap is counted from its member keys; a shared-queue run it holds moves to the project's lane", () => {
    const d = tenant({ max_concurrency: 3 });
    d.admit("a", "p");
    d.admit("b", "p");
    d.admit("c", "q");
    d.admit("w1", "p");
    d.admit("w2", "q");
    const put = d.send({ type: "tenant.put", settings: { project_max_concurrency: { p: 2 } } });
    expect(put.answer).toMatchObject({ outcome: "updated", tenant: { active_by_project: { p: 2 } } });
    // c ends: w1 (p) is the oldest but p is at its cap: it moves to p's lane, and w2 starts.
    expect(d.send({ type: "tenant.run_ended", run_id: "c", project: "q" }).admitted).toEqual(["w2"]);
    expect(d.queued()).toEqual([["w1", "p"]]);
    expect(Object.keys(d.ctx.lanes)).toEqual(["p"]);
    expect(d.send({ type: "tenant.run_ended", run_id: "a", project: "p" }).admitted).toEqual(["w1"]);
    expect(d.ctx.active_by_project).toEqual({ p: 2 });
  });

  it("recheck: a run holding a slot is told again; a queued one waits; an unknown one is answered unknown", () => {
    const d = tenant({ max_concurrency: 1 });
    d.admit("a");
    d.admit("b");
    const held = d.send({ type: "tenant.recheck", run_id: "a" });
    expect(held.answer).toEqual({ outcome: "admitted", run_id: "a" });
    expect(held.admitted).toEqual(["a"]);
    const before = d.ctx;
    expect(d.send({ type: "tenant.recheck", run_id: "b" }).answer).toEqual({ outcome: "queued", run_id: "b", position: 0 });
    expect(d.send({ type: "tenant.recheck", run_id: "zz" }).answer).toEqual({ outcome: "unknown", run_id: "zz" });
    expect(d.ctx).toBe(before);
  });

  it("run ids and projects named like Object.prototype members, or with dots and colons, are counted like any other", () => {
    const d = tenant({ project_max_concurrency: { constructor: 1 } });
    expect(d.admit("toString", "constructor").outcome).toBe("admitted");
    expect(d.admit("hasOwnProperty", "constructor").outcome).toBe("queued");
    expect(d.end("valueOf")).toMatchObject({ outcome: "not_running" });
    expect(d.ctx.active_by_project).toEqual({ constructor: 1 });
    expect(TenantCommandSchema.safeParse({ type: "tenant.admit_run", run_id: "__proto__", project: "p" }).success).toBe(false);
    expect(d.admit("a.b:c", "x.y").outcome).toBe("admitted");
    expect(d.admit("a.b:c", "x.y")).toMatchObject({ outcome: "admitted", duplicate: true });
    expect(d.running()).toMatchObject({ toString: "constructor" });
    for (const key of d.store.keys.keys()) expect(key).toMatch(/^tenant\.acme(\.[A-Za-z0-9_=-]+)+$/);
  });
});

describe("idempotence per run id", () => {
  it("the same run admitted twice counts once, also after it ended", () => {
    const d = tenant();
    d.admit("r");
    expect(d.admit("r")).toMatchObject({ outcome: "admitted", duplicate: true, starts_today: 1, active_runs: 1 });
    expect(d.ctx.starts_today).toBe(1);
    d.end("r");
    expect(d.admit("r")).toMatchObject({ outcome: "admitted", duplicate: true, active_runs: 0 });
    expect(d.ctx.active_runs).toBe(0);
    expect(d.end("r")).toEqual({ outcome: "not_running", run_id: "r" });
    expect(d.end("never")).toEqual({ outcome: "not_running", run_id: "never" });
    expect(d.ctx.active_runs).toBe(0);
  });

  it("remembers an ended run for the ended-run retention (its mark's TTL), then forgets it", () => {
    const d = tenant();
    d.admit("r");
    const ended = d.send({ type: "tenant.run_ended", run_id: "r", project: "p" });
    expect(ended.effects).toContainEqual({ type: "runway.store", key: "tenant.acme.e.r", value: { at: T0 }, ttl_ms: DEFAULT_ENDED_RETENTION_MS });
    d.at(T0 + DEFAULT_ENDED_RETENTION_MS - 1);
    expect(d.admit("r")).toMatchObject({ outcome: "admitted", duplicate: true });
    d.at(T0 + DEFAULT_ENDED_RETENTION_MS);
    expect(d.admit("r")).toMatchObject({ outcome: "admitted", duplicate: false });
  });

  it("a run id made up for its start (fresh) is admitted without reading its member keys; without fresh the same admission reads them", () => {
    const d = tenant();
    const reads = d.store.reads;
    expect(d.send({ type: "tenant.admit_run", run_id: "new-1", project: "p", fresh: true }).answer).toMatchObject({
      outcome: "admitted",
      duplicate: false,
      active_runs: 1,
    });
    expect(d.store.reads).toBe(reads);
    // Its end is counted once, and leaves no ended mark: no later admission can name a made-up id.
    const ended = d.send({ type: "tenant.run_ended", run_id: "new-1", project: "p" });
    expect(ended.answer).toMatchObject({ outcome: "ended", active_runs: 0 });
    expect(ended.effects.filter((e) => e.type === "runway.store")).toEqual([{ type: "runway.store", key: "tenant.acme.m.new-1", value: null }]);
    expect(d.end("new-1")).toEqual({ outcome: "not_running", run_id: "new-1" });
    expect(d.ctx.active_runs).toBe(0);
    expect(d.store.reads).toBeGreaterThan(reads);
    // gatherFacts (the actor's prepare) asks its reader for nothing for a fresh admission.
    const asked: string[][] = [];
    const reader: MembershipReader = {
      read: (keys) => (asked.push([...keys]), Promise.resolve({})),
      runningByProject: () => Promise.resolve({}),
      spentOn: () => Promise.resolve(0),
    };
    return gatherFacts(d.ctx, { type: "tenant.admit_run", run_id: "new-2", project: "p", fresh: true, now: T0 } as never, reader).then((facts) => {
      expect(facts).toEqual({});
      expect(asked).toEqual([]);
    });
  });

  it("a write costs the same whatever the population: the record stays the same size with 3,000 runs as with 3", () => {
    const size = (n: number) => {
      const d = tenant({ max_concurrency: 10_000, project_max_concurrency: { held: 0 } });
      for (let i = 0; i < n; i++) d.admit(`run-${i}`, i % 2 ? "held" : `p${i % 7}`);
      return JSON.stringify(tenantMachine.getPersistedSnapshot(d.snap)).length;
    };
    const small = size(3);
    const big = size(3_000);
    expect(big).toBeLessThan(small + 64);
  });
});

describe("settings", () => {
  it("the mailbox schema rejects bad settings", () => {
    const bad: unknown[] = [
      { weight: 0 },
      { weight: -1 },
      { max_concurrency: 0 },
      { day_cap: -1 },
      { day_cap: 1.5 },
      { wieght: 2 },
      { provider_quotas: { gpt: { requests_per_minute: 1, tokens_per_minute: 1 } } },
      { class_shares: { interactive: 2 } },
    ];
    for (const settings of bad) expect(TenantCommandSchema.safeParse({ type: "tenant.put", settings }).success, JSON.stringify(settings)).toBe(false);
    expect(
      TenantCommandSchema.safeParse({
        type: "tenant.put",
        settings: { provider_quotas: { "openai/gpt-4o": { requests_per_minute: 60, tokens_per_minute: 90_000 } } },
      }).success,
    ).toBe(true);
  });

  it("the machine answers invalid settings with a closed invalid_input and changes nothing", () => {
    const d = tenant();
    const before = d.ctx;
    const r = d.send({ type: "tenant.put", settings: { weight: 0 } });
    expect(r.answer).toMatchObject({ outcome: "invalid_input", reason: expect.stringContaining("settings.weight") });
    expect(r.audits).toEqual([]);
    expect(d.ctx).toBe(before);
    const fresh = tenant(null);
    const c = fresh.send({ type: "tenant.create", settings: { weight: 0 } });
    expect(c.answer.outcome).toBe("invalid_input");
    expect(fresh.snap.value).toBe("new");
  });

  it("a put merges key by key, replaces maps whole, and a no-op put is not audited", () => {
    const d = tenant({ weight: 3, project_max_concurrency: { p: 1, q: 2 } });
    const r = d.send({ type: "tenant.put", settings: { project_max_concurrency: { q: 5 } } });
    expect(r.answer).toMatchObject({ outcome: "updated", changed: ["project_max_concurrency"] });
    expect(r.audits[0]).toMatchObject({
      data: { type: "tenant.settings_updated", changed: ["project_max_concurrency"], previous: { project_max_concurrency: { p: 1, q: 2 } } },
    });
    expect(d.ctx.settings).toMatchObject({ weight: 3, max_concurrency: 100, day_cap: 100_000, project_max_concurrency: { q: 5 } });
    const same = d.send({ type: "tenant.put", settings: { weight: 3 } });
    expect(same.answer).toMatchObject({ outcome: "updated", changed: [] });
    expect(same.audits).toEqual([]);
  });

  it("the persisted snapshot survives a JSON round trip and carries on identically", () => {
    const d = tenant({ max_concurrency: 1 });
    d.admit("a");
    const restored = tenantMachine.resolveState(JSON.parse(JSON.stringify(tenantMachine.getPersistedSnapshot(d.snap))));
    const cmd: TenantCommand = { type: "tenant.admit_run", run_id: "b", project: "p" };
    const copy = new MemoryMembership(TENANT);
    for (const [k, v] of d.store.keys) copy.keys.set(k, v);
    expect(deliver(restored, cmd, T0 + 5, copy).answer).toEqual(deliver(d.snap, cmd, T0 + 5, d.store).answer);
  });
});

describe("property: counts follow admissions and ends", () => {
  const run = fc.constantFrom("r1", "r2", "r3", "r4", "r5", "r6");
  const project = fc.constantFrom("p", "q", "z");
  const step = fc.oneof(
    { weight: 6, arbitrary: fc.record({ type: fc.constant("tenant.admit_run" as const), run_id: run, project }) },
    { weight: 4, arbitrary: fc.record({ type: fc.constant("tenant.run_ended" as const), run_id: run, project }) },
    fc.record({ type: fc.constantFrom("tenant.kill" as const, "tenant.drain" as const), reason: fc.constant("x") }),
    fc.record({ type: fc.constant("tenant.resume" as const) }),
    fc.record({
      type: fc.constant("tenant.put" as const),
      settings: fc.record(
        {
          max_concurrency: fc.integer({ min: 1, max: 4 }),
          day_cap: fc.integer({ min: 0, max: 6 }),
          project_max_concurrency: fc.dictionary(project, fc.integer({ min: 0, max: 2 })),
        },
        { requiredKeys: [] },
      ),
    }),
    fc.record({ type: fc.constant("tenant.create" as const) }),
    fc.record({ type: fc.constant("tick" as const), ms: fc.integer({ min: -DAY_MS, max: 2 * DAY_MS }) }),
  );
  const OUTCOMES = new Set([
    "admitted",
    "queued",
    "queue_full",
    "day_cap_reached",
    "tenant_killed",
    "tenant_draining",
    "ended",
    "not_running",
    "updated",
    "exists",
    "active",
    "killed",
    "draining",
    "created",
    "refused",
    "promoted",
  ]);

  it("counts follow admissions, promotions and ends; queued runs start whenever a slot fits, and only then", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.array(step, { maxLength: 80 }), (createFirst, steps) => {
        let [snap] = initialTransition(tenantMachine, { id: TENANT });
        const store = new MemoryMembership(TENANT);
        let now = T0;
        const holding = new Set<string>();
        if (createFirst) snap = deliver(snap, { type: "tenant.create" }, now, store).snap;
        for (const s of steps) {
          if (s.type === "tick") {
            now += s.ms;
            continue;
          }
          const before = snap;
          // Settled: the commands the tenant sends itself (tenant.promote) are delivered too, as its mailbox would.
          const r = deliver(snap, s, now, store);
          snap = r.snap;
          const a = r.answer;
          expect(OUTCOMES.has(a.outcome)).toBe(true);
          if (a.outcome === "admitted" && a.duplicate === false) {
            expect(before.context.state).toBe("active");
            expect(before.context.active_runs).toBeLessThan(before.context.settings.max_concurrency);
            holding.add(a.run_id as string);
          }
          if (a.outcome === "ended") holding.delete(a.run_id as string);
          for (const id of r.admitted) holding.add(id);
          if (["day_cap_reached", "tenant_killed", "tenant_draining", "not_running", "refused", "exists"].includes(a.outcome) || a.duplicate === true)
            expect(snap.context).toBe(before.context);
          const c = snap.context;
          const running = store.running(now);
          expect(new Set(Object.keys(running))).toEqual(holding);
          expect(c.active_runs).toBe(holding.size);
          // Counted per project for every project with a cap, and only those.
          const byProject: Record<string, number> = {};
          for (const p of Object.values(running)) if (Object.hasOwn(c.settings.project_max_concurrency, p)) byProject[p] = (byProject[p] ?? 0) + 1;
          expect(c.active_by_project).toEqual(byProject);
          const queued = store.queued(now);
          expect(c.queued_runs).toBe(queued.length);
          expect(Object.values(c.lanes).reduce((n, l) => n + l.count, 0)).toBe(queued.length);
          for (const [id] of queued) expect(Object.hasOwn(running, id)).toBe(false);
          // Every queued run holds exactly one slot, and each lane's head is its oldest slot.
          expect(
            Object.values(store.slots())
              .map((e) => e.r)
              .sort(),
          ).toEqual(queued.map(([id]) => id).sort());
          // Work-conserving: an active tenant leaves no queued run that its caps would let start.
          if (c.state === "active") {
            for (const [, project] of queued) {
              const cap = c.settings.project_max_concurrency[project];
              const blocked = c.active_runs >= c.settings.max_concurrency || (cap !== undefined && (c.active_by_project[project] ?? 0) >= cap);
              expect(blocked).toBe(true);
            }
          }
          expect(snap.value).toBe(c.state);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe("a record stored before issue 9 (membership inside it) loads and is migrated", () => {
  const fixture = JSON.parse(readFileSync(new URL("../fixtures/records/tenant-v1-membership-in-record.json", import.meta.url), "utf8")) as {
    record_msgpack_base64: string;
  };
  const stored = () => {
    const decoded = actorRecordCodec.decode(new Uint8Array(Buffer.from(fixture.record_msgpack_base64, "base64")));
    if (!decoded.ok) throw new Error(decoded.detail);
    return tenantMachine.resolveState(decoded.value.snapshot as never);
  };

  it("the stored fixture (commit 3109b83) is read as it was: its view counts what the record held", () => {
    const snap = stored();
    expect(snap.value).toBe("active");
    expect(tenantView(snap.context)).toMatchObject({
      id: "legacy",
      active_runs: 3,
      active_by_project: { p: 1 },
      queued_runs: 3,
      active_descendants: 4,
      migrating: 3 + 3 + 1 + 1,
    });
  });

  it("its first command moves every member into keys (queue order kept), and the tenant then decides as before", () => {
    const store = new MemoryMembership("legacy");
    let snap = stored();
    const send = (command: TenantCommand) => {
      const r = deliver(snap, command, T0 + 100, store);
      snap = r.snap;
      return r;
    };
    expect(send({ type: "tenant.migrate" }).answer).toEqual({ outcome: "migrated", left: 0 });
    const c = snap.context;
    expect(c).toMatchObject({ v: 2, active_runs: 3, queued_runs: 3, active_descendants: 4 });
    expect(c.legacy).toBeUndefined();
    expect((c as { running?: unknown }).running).toBeUndefined();
    expect(store.running()).toEqual({ legacy_a: "p", legacy_b: "q", legacy_d: "q" });
    expect(store.queued()).toEqual([
      ["legacy_c", "p"],
      ["legacy_e", "q"],
      ["legacy_f", "p"],
    ]);
    // z ended before the upgrade: still a duplicate.
    expect(send({ type: "tenant.admit_run", run_id: "legacy_z", project: "q" }).answer).toMatchObject({ outcome: "admitted", duplicate: true });
    // b's slot: c is older but p is at its cap (a runs); e is the oldest that fits.
    expect(send({ type: "tenant.run_ended", run_id: "legacy_b", project: "q" }).admitted).toEqual(["legacy_e"]);
    expect(send({ type: "tenant.run_ended", run_id: "legacy_a", project: "p" }).admitted).toEqual(["legacy_c"]);
    expect(send({ type: "tenant.release_expansion", run_id: "legacy_a", node: "m" }).answer).toEqual({
      outcome: "expansion_released",
      run_id: "legacy_a",
      node: "m",
      active_descendants: 0,
    });
    expect(tenantView(snap.context)).toMatchObject({ active_runs: 3, queued_runs: 1, active_by_project: { p: 1 }, migrating: 0 });
  });

  it("a large one moves out a chunk per transition; meanwhile admissions are asked again and run reports wait in the tenant's mailbox, so nothing is lost or counted twice", () => {
    const running = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`r${i}`, i % 2 ? "p" : "q"]));
    const queue = Array.from({ length: 5_000 }, (_, i) => [`w${i}`, "p"] as [string, string]);
    const old = {
      ...tenantView(newTenantV2()),
      settings: { ...newTenantV2().settings, max_concurrency: 10_000 },
      state: "active",
      day: utcDay(T0),
      running,
      queue,
      ended: Array.from({ length: 1_000 }, (_, i) => `x${i}`),
      descendants: {},
      active_descendants: 0,
    };
    delete (old as { migrating?: number }).migrating;
    delete (old as { queued_runs?: number }).queued_runs;
    let snap = tenantMachine.resolveState({ value: "active", context: old } as never);
    const store = new MemoryMembership(TENANT);
    // Not settled: the tenant's own tenant.migrate and re-sent reports queue up as in its mailbox.
    const mailbox: TenantCommand[] = [];
    const send = (command: TenantCommand) => {
      const r = deliver(snap, command, T0 + 1, store, false);
      snap = r.snap;
      for (const e of r.effects) if (e.type === "runway.send" && e.to.kind === "tenant") mailbox.push(e.event as TenantCommand);
      return r;
    };
    expect(send({ type: "tenant.admit_run", run_id: "n1", project: "q" }).answer).toMatchObject({ outcome: "migrating" });
    expect(send({ type: "tenant.run_ended", run_id: "r1", project: "p" }).answer).toMatchObject({ outcome: "migrating" });
    let transitions = 2;
    while (mailbox.length > 0) {
      send(mailbox.shift()!);
      transitions++;
    }
    expect(transitions).toBeLessThan(80);
    expect(snap.context.legacy).toBeUndefined();
    // r1's end was applied once the move was done: its slot went to the oldest queued run.
    expect(snap.context).toMatchObject({ active_runs: 10_000, queued_runs: 4_999 });
    expect(store.running(T0 + 1)).not.toHaveProperty("r1");
    expect(store.running(T0 + 1)).toHaveProperty("w0", "p");
    expect(store.queued(T0 + 1)[0]).toEqual(["w1", "p"]);
    expect(send({ type: "tenant.admit_run", run_id: "x7", project: "q" }).answer).toMatchObject({ outcome: "admitted", duplicate: true });
    expect(JSON.stringify(tenantMachine.getPersistedSnapshot(snap)).length).toBeLessThan(2_000);
  });
});

function newTenantV2() {
  return initialTransition(tenantMachine, { id: TENANT })[0].context;
}

describe("gathering a decision's facts (the actor's prepare)", () => {
  /** The twin's keys behind a reader that counts its rounds and keys. */
  const counting = (store: MemoryMembership, now: number) => {
    const inner = store.reader(now);
    const seen = { rounds: 0, keys: 0 };
    const reader: MembershipReader = {
      read: async (keys) => {
        seen.rounds++;
        seen.keys += keys.length;
        return inner.read(keys);
      },
      runningByProject: () => inner.runningByProject(),
      spentOn: (day) => inner.spentOn(day),
    };
    return { reader, seen };
  };

  it("an admission is one round of two keys, whatever the tenant holds; the facts decide exactly what the machine then decides", async () => {
    const d = tenant({ max_concurrency: 10_000, project_max_concurrency: { held: 0 } });
    for (let i = 0; i < 2_000; i++) d.admit(`r${i}`, i % 4 ? "p" : "held");
    const { reader, seen } = counting(d.store, d.now);
    const event = { type: "tenant.admit_run" as const, run_id: "fresh", project: "p", now: d.now };
    const facts = await gatherFacts(d.ctx, event, reader);
    expect(seen).toEqual({ rounds: 1, keys: 2 });
    expect(Object.keys(facts).sort()).toEqual(["e.fresh", "m.fresh"]);
    expect(facts).toEqual(d.store.facts(d.ctx, event));
  });

  it("the machine, given the event its facts were gathered with, decides it once (no decision kept from the gathering) and emits what that decision gives", async () => {
    const d = tenant({ max_concurrency: 10_000 });
    d.admit("keyed");
    for (const command of [
      { type: "tenant.admit_run" as const, run_id: "fresh", project: "p" },
      { type: "tenant.run_ended" as const, run_id: "keyed", project: "p" },
    ]) {
      const gathered = await withGatheredFacts(d.ctx, { ...command, now: d.now }, d.store.reader(d.now));
      // Every read of a fact is counted: a decision reads the same facts each time it is made.
      let reads = 0;
      const counted = (): typeof gathered => ({
        ...gathered,
        facts: new Proxy(gathered.facts ?? {}, {
          get: (target, key) => (reads++, Reflect.get(target, key)),
          has: (target, key) => (reads++, Reflect.has(target, key)),
          getOwnPropertyDescriptor: (target, key) => (reads++, Reflect.getOwnPropertyDescriptor(target, key)),
        }),
      });
      const once = applyTenantCommand(d.ctx, counted());
      const perDecision = reads;
      reads = 0;
      const [next, actions] = transition(tenantMachine, d.snap, counted());
      expect(perDecision).toBeGreaterThan(0);
      expect(reads).toBe(perDecision);
      // XState types a machine's actions by its config; the emits it runs are `xstate.emit` with the effect as `params.event`.
      const executed = actions as readonly { type: string; params?: unknown }[];
      const emitted = executed.filter((a) => a.type === "xstate.emit").map((a) => (a.params as { event: unknown }).event);
      expect(next.context).toEqual(once.context);
      expect(emitted).toEqual(once.effects);
    }
  });

  it("a run's end (and a recheck) reads its member key only: the ended mark is a second admission's to read, not an end's", async () => {
    const d = tenant({ max_concurrency: 10_000 });
    d.admit("keyed");
    d.send({ type: "tenant.admit_run", run_id: "fresh", project: "p", fresh: true });
    for (const event of [
      { type: "tenant.run_ended" as const, run_id: "keyed", project: "p", now: d.now },
      { type: "tenant.run_ended" as const, run_id: "fresh", project: "p", now: d.now },
      { type: "tenant.recheck" as const, run_id: "keyed", now: d.now },
    ]) {
      const { reader, seen } = counting(d.store, d.now);
      const facts = await gatherFacts(d.ctx, event, reader);
      expect(seen).toEqual({ rounds: 1, keys: 1 });
      expect(Object.keys(facts)).toEqual([`m.${event.run_id}`]);
      // Decidable with that key alone.
      expect(missingFacts(d.ctx, event, facts)).toBeNull();
    }
    // The end still leaves the mark a second admission of the keyed run reads.
    expect(d.send({ type: "tenant.run_ended", run_id: "keyed", project: "p" }).effects.filter((e) => e.type === "runway.store")).toEqual([
      { type: "runway.store", key: "tenant.acme.m.keyed", value: null },
      expect.objectContaining({ type: "runway.store", key: "tenant.acme.e.keyed" }),
    ]);
  });

  it("a decision that starts many queued runs reads each lane's next slots in groups, not one round per run", async () => {
    const d = tenant({ max_concurrency: 1 });
    d.admit("a");
    for (let i = 0; i < 40; i++) d.admit(`q${i}`);
    // Raising the cap starts the 40 queued runs in one transition.
    const { reader, seen } = counting(d.store, d.now);
    const event = { type: "tenant.put" as const, settings: { max_concurrency: 100 }, now: d.now };
    const facts = await gatherFacts(d.ctx, event, reader);
    expect(seen.rounds).toBeLessThanOrEqual(4);
    expect(d.send({ type: "tenant.put", settings: { max_concurrency: 100 } }).admitted).toHaveLength(40);
    expect(Object.keys(facts).filter((k) => k.startsWith("q.")).length).toBeGreaterThanOrEqual(39);
  });
});
