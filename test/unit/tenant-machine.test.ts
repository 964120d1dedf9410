import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { initialTransition, transition, type SnapshotFrom } from "xstate";
import {
  DAY_MS,
  RECENT_ENDED,
  TENANT_COMMANDS,
  TENANT_STATES,
  TENANT_TRANSITIONS,
  TenantCommandSchema,
  admitDecision,
  auditSubject,
  newTenant,
  nextUtcDay,
  runEndedDecision,
  tenantMachine,
  utcDay,
  type TenantCommand,
  type TenantCommandType,
  type TenantEffect,
  type TenantSettingsPatch,
  type TenantState,
} from "../../machines/tenant/index.js";

type Snap = SnapshotFrom<typeof tenantMachine>;
type Answer = { outcome: string; [k: string]: unknown };

const T0 = Date.UTC(2025, 0, 15, 12);
const TENANT = "acme";

const emitted = (actions: readonly { type: string }[]): TenantEffect[] =>
  actions.filter((a) => a.type === "xstate.emit").map((a) => (a as unknown as { params: { event: TenantEffect } }).params.event);

/** What the host does with one command: refuse it when the machine has no transition, else transition and collect effects. */
function deliver(snap: Snap, command: TenantCommand, now: number) {
  const event = { ...command, now };
  if (!snap.can(event))
    return { snap, refused: true, answer: { outcome: "refused", state: snap.value } as Answer, audits: [] as TenantEffect[], effects: [] as TenantEffect[] };
  const [next, actions] = transition(tenantMachine, snap, event);
  const effects = emitted(actions);
  const answers = effects.filter((e) => e.type === "runway.answer");
  expect(answers).toHaveLength(1);
  expect(effects[0]?.type).toBe("runway.answer");
  return { snap: next, refused: false, answer: answers[0]!.value as Answer, audits: effects.filter((e) => e.type === "runway.publish"), effects };
}

/** A small driver: a snapshot plus a clock that the test moves. */
/** `null`: not created. */
function tenant(settings?: TenantSettingsPatch | null) {
  let [snap] = initialTransition(tenantMachine, { id: TENANT });
  let now = T0;
  const d = {
    get snap() {
      return snap;
    },
    get ctx() {
      return snap.context;
    },
    at(t: number) {
      now = t;
      return d;
    },
    send(command: TenantCommand) {
      const r = deliver(snap, command, now);
      snap = r.snap;
      return r;
    },
    admit: (run_id: string, project = "p") => d.send({ type: "tenant.admit_run", run_id, project }).answer,
    end: (run_id: string, project = "p") => d.send({ type: "tenant.run_ended", run_id, project }).answer,
  };
  if (settings !== null) d.send({ type: "tenant.create", ...(settings ? { settings } : {}) });
  return d;
}

/** A tenant in `state` with one run (`r0`) admitted while it was active. */
function tenantIn(state: TenantState): Snap {
  const d = tenant(state === "new" ? null : undefined);
  if (state !== "new") d.admit("r0");
  if (state === "killed") d.send({ type: "tenant.kill", reason: "abuse" });
  if (state === "draining") d.send({ type: "tenant.drain", reason: "migration" });
  expect(d.snap.value).toBe(state);
  return d.snap;
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
        const before = tenantIn(state);
        const r = deliver(before, SAMPLE[command], T0 + 1_000);
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
    const d = tenant();
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
});

describe("concurrency caps queue instead of refusing", () => {
  const admittedBy = (r: { effects: TenantEffect[] }) => r.effects.flatMap((e) => (e.type === "runway.send" ? [e.to.id] : []));

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
    expect(admittedBy(ended)).toEqual(["c"]);
    expect(ended.effects).toContainEqual({ type: "runway.send", to: { kind: "run", id: "c" }, event: { type: "run.admitted" } });
    expect(d.ctx.running).toEqual({ a: "p", c: "p" });
    expect(d.ctx.queue).toEqual([["e", "p"]]);
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
    expect(admittedBy(d.send({ type: "tenant.run_ended", run_id: "a", project: "p" }))).toEqual(["b"]);
    expect(d.ctx.active_by_project).toEqual({ p: 1, q: 1 });
  });

  it("a queued run that ends (cancelled while waiting) leaves the queue and frees nothing", () => {
    const d = tenant({ max_concurrency: 1 });
    d.admit("a");
    d.admit("b");
    const r = d.send({ type: "tenant.run_ended", run_id: "b", project: "p" });
    expect(r.answer).toMatchObject({ outcome: "ended", active_runs: 1 });
    expect(admittedBy(r)).toEqual([]);
    expect(d.ctx.queue).toEqual([]);
    expect(d.admit("b")).toMatchObject({ outcome: "admitted", duplicate: true });
  });

  it("raising the cap or resuming starts queued runs; a draining tenant keeps them queued", () => {
    const d = tenant({ max_concurrency: 1 });
    d.admit("a");
    d.admit("b");
    d.admit("c");
    expect(admittedBy(d.send({ type: "tenant.put", settings: { max_concurrency: 2 } }))).toEqual(["b"]);
    d.send({ type: "tenant.drain", reason: "maintenance" });
    expect(admittedBy(d.send({ type: "tenant.run_ended", run_id: "a", project: "p" }))).toEqual([]);
    expect(d.ctx.queue).toEqual([["c", "p"]]);
    expect(admittedBy(d.send({ type: "tenant.resume" }))).toEqual(["c"]);
  });

  it("recheck: a run holding a slot is told again; a queued one waits; an unknown one is answered unknown", () => {
    const d = tenant({ max_concurrency: 1 });
    d.admit("a");
    d.admit("b");
    const held = d.send({ type: "tenant.recheck", run_id: "a" });
    expect(held.answer).toEqual({ outcome: "admitted", run_id: "a" });
    expect(admittedBy(held)).toEqual(["a"]);
    const before = d.ctx;
    expect(d.send({ type: "tenant.recheck", run_id: "b" }).answer).toEqual({ outcome: "queued", run_id: "b", position: 0 });
    expect(d.send({ type: "tenant.recheck", run_id: "zz" }).answer).toEqual({ outcome: "unknown", run_id: "zz" });
    expect(d.ctx).toBe(before);
  });

  it("run ids and projects named like Object.prototype members are counted like any other", () => {
    const d = tenant({ project_max_concurrency: { constructor: 1 } });
    expect(d.admit("toString", "constructor").outcome).toBe("admitted");
    expect(d.admit("hasOwnProperty", "constructor").outcome).toBe("queued");
    expect(d.end("valueOf")).toMatchObject({ outcome: "not_running" });
    expect(d.ctx.active_by_project).toEqual({ constructor: 1 });
    expect(TenantCommandSchema.safeParse({ type: "tenant.admit_run", run_id: "__proto__", project: "p" }).success).toBe(false);
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

  it(`remembers the last ${RECENT_ENDED} ended runs, no more`, () => {
    let c = { ...newTenant(TENANT), state: "active" as const, day: utcDay(T0) };
    for (let i = 0; i <= RECENT_ENDED; i++) {
      c = admitDecision(c, { run_id: `r${i}`, project: "p" }, T0).context as typeof c;
      c = runEndedDecision(c, { run_id: `r${i}` }, T0).context as typeof c;
    }
    expect(c.ended).toHaveLength(RECENT_ENDED);
    expect(c.ended[0]).toBe("r1");
    expect(admitDecision(c, { run_id: "r1", project: "p" }, T0).answer).toMatchObject({ duplicate: true });
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
    expect(deliver(restored, cmd, T0 + 5).answer).toEqual(deliver(d.snap, cmd, T0 + 5).answer);
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
  ]);

  it("counts follow admissions, promotions and ends; queued runs start whenever a slot fits, and only then", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.array(step, { maxLength: 80 }), (createFirst, steps) => {
        let [snap] = initialTransition(tenantMachine, { id: TENANT });
        let now = T0;
        const holding = new Set<string>();
        if (createFirst) snap = deliver(snap, { type: "tenant.create" }, now).snap;
        for (const s of steps) {
          if (s.type === "tick") {
            now += s.ms;
            continue;
          }
          const before = snap;
          const r = deliver(snap, s, now);
          snap = r.snap;
          const a = r.answer;
          expect(OUTCOMES.has(a.outcome)).toBe(true);
          if (a.outcome === "admitted" && a.duplicate === false) {
            expect(before.context.state).toBe("active");
            expect(before.context.active_runs).toBeLessThan(before.context.settings.max_concurrency);
            holding.add(a.run_id as string);
          }
          if (a.outcome === "ended") holding.delete(a.run_id as string);
          for (const e of r.effects) if (e.type === "runway.send") holding.add(e.to.id);
          if (["day_cap_reached", "tenant_killed", "tenant_draining", "not_running", "refused", "exists"].includes(a.outcome) || a.duplicate === true)
            expect(snap.context).toBe(before.context);
          const c = snap.context;
          expect(new Set(Object.keys(c.running))).toEqual(holding);
          expect(c.active_runs).toBe(holding.size);
          expect(Object.values(c.active_by_project).reduce((x, y) => x + y, 0)).toBe(c.active_runs);
          expect(Object.values(c.active_by_project).every((n) => n > 0)).toBe(true);
          const queued = c.queue.map(([id]) => id);
          expect(new Set(queued).size).toBe(queued.length);
          for (const id of queued) expect(Object.hasOwn(c.running, id)).toBe(false);
          // Work-conserving: an active tenant leaves no queued run that its caps would let start.
          if (c.state === "active") {
            for (const [, project] of c.queue) {
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
