import { describe, expect, it } from "vitest";
import { rootSeed } from "./run-driver.js";
import { initialTransition, transition, type AnyMachineSnapshot } from "xstate";
import { compileDefinition, executionMachine, parentGone, RunFacts, sweepPlan, type Plan, type RunContext, type RunFact } from "../../machines/index.js";
import { DEFAULT_SWEEP, HANDED_OVER } from "../../machines/execution/index.js";

/** The recovery sweep's decisions (seed 004's reaper and wait sweep contract tests that apply), on the pure run machine. */

function plan(definition: object): Plan {
  const c = compileDefinition(definition, { handlers: new Set(["h"]) });
  if (!c.ok) throw new Error(JSON.stringify(c.errors));
  return c.plan;
}

type Emitted = { type: string; channel?: string; payload?: Record<string, unknown>; to?: { kind: string; id: string }; event?: Record<string, unknown> };
const emitted = (actions: readonly { type: string }[]) =>
  actions.filter((a) => (a.type as string) === "xstate.emit").map((a) => (a as unknown as { params: { event: Emitted } }).params.event);

const HOUR = 3_600_000;
const T0 = 1_000_000;

function runner(p: Plan, extra: Record<string, unknown> = {}) {
  let [snap] = initialTransition(executionMachine) as [AnyMachineSnapshot, unknown];
  const memory = new RunFacts();
  return {
    get snap() {
      return snap;
    },
    get run() {
      return snap.context.run as RunContext;
    },
    can(event: object, now = T0) {
      return snap.can({ ...event, now, plan: p, memory, ...extra } as never);
    },
    send(event: object, now = T0) {
      const [next, actions] = transition(executionMachine, snap, { ...event, now, plan: p, memory, ...extra } as never);
      snap = next;
      const effects = emitted(actions);
      for (const e of effects) if (e.type === "runway.journal") memory.add((e as unknown as { data: RunFact }).data);
      return effects;
    },
  };
}

const seed = (over: Record<string, unknown> = {}) => rootSeed({ lane: "interactive" as const, ...over });

/** A child's parent as its create reads it: running, waiting on the child. */
const parentOf = (root: string) => ({ status: "running", tenant: "t", root_run_id: root, depth: 0, waits: true });

const oneStep = plan({ name: "w", nodes: [{ id: "a", kind: "code", handler: "h", timeout_ms: 10_000 }] });

describe("a run queued behind its tenant's caps", () => {
  it("is created queued, asks its tenant once, is never reaped at any age, and starts on run.admitted", () => {
    const r = runner(oneStep);
    const created = r.send({ type: "run.create", run: seed({ admission: "queued" }) });
    expect(r.run.lifecycle.status).toBe("queued");
    expect(created.find((e) => e.channel === "step.ready")).toBeUndefined();
    expect(created).toContainEqual({ type: "runway.send", to: { kind: "tenant", id: "t" }, event: { type: "tenant.recheck", run_id: "t_1" } });
    expect(created.find((e) => e.type === "runway.answer")).toMatchObject({ value: { outcome: "started", run: { status: "queued" } } });
    for (const later of [10 * 60_000, 24 * HOUR, 3 * 24 * HOUR, 365 * 24 * HOUR]) {
      // The sweeper only asks the tenant again; the run itself has nothing to repair, so no write.
      expect(sweepPlan(r.run, T0 + later)).toEqual([{ action: "recheck_admission", tenant: "t" }]);
      expect(r.can({ type: "run.sweep", at: T0 + later })).toBe(false);
    }
    const started = r.send({ type: "run.admitted" }, T0 + 5);
    expect(r.run.lifecycle.status).toBe("running");
    expect(r.run.lifecycle.started_at).toBe(T0 + 5);
    expect(started.filter((e) => e.channel === "step.ready")).toHaveLength(1);
    // Told twice (a recheck raced the first): the second changes nothing.
    expect(r.can({ type: "run.admitted" })).toBe(false);
  });

  it("a queued child is never rechecked with a tenant (children are not admitted by tenants)", () => {
    const r = runner(oneStep);
    r.send({
      type: "run.create",
      run: seed({ admission: "queued", root_run_id: "t_p", parent_run_id: "t_p", parent_node: "n", depth: 1 }),
      parent: parentOf("t_p"),
    });
    expect(sweepPlan(r.run, T0 + HOUR)).toEqual([]);
  });
});

describe("the wait sweep", () => {
  const sleeps = plan({
    name: "w",
    nodes: [
      { id: "s1", kind: "sleep", duration_ms: HOUR },
      { id: "s2", kind: "sleep", needs: ["s1"], duration_ms: HOUR },
    ],
  });
  const grace = { wait_grace_ms: 10_000 };

  it("C014 C015 a waiting run survives every pass before its deadline plus grace, and is ended wait_abandoned by the first pass after; the record says why", () => {
    const r = runner(sleeps, grace);
    r.send({ type: "run.create", run: seed() });
    expect(r.run.lifecycle).toMatchObject({ status: "waiting", waiting_on: "delay", waiting_expires_at: T0 + HOUR + 10_000 });
    for (const at of [T0 + 1, T0 + 30 * 60_000, T0 + HOUR, T0 + HOUR + 9_999]) {
      expect(sweepPlan(r.run, at)).toEqual([]);
      expect(r.can({ type: "run.sweep", at })).toBe(false);
    }
    const effects = r.send({ type: "run.sweep", at: T0 + HOUR + 10_000 });
    expect(r.snap.value).toBe("failed");
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "wait_abandoned" });
    expect(r.run.error!.message).toMatch(/recovery sweep/);
    expect(effects).toContainEqual({ type: "runway.local", channel: "metrics", payload: { counter: "sweep_actions", tenant: "t", action: "wait_abandoned" } });
  });

  it("C016 a run re-aimed at a later wait between the sweep's read and its command is left alone", () => {
    const r = runner(sleeps, grace);
    r.send({ type: "run.create", run: seed() });
    const read = r.run;
    const at = T0 + HOUR + 20_000;
    expect(sweepPlan(read, at)).toEqual([{ action: "wait_abandoned" }]);
    // Meanwhile the first sleep's timer fired: the run now waits on the second, with a later deadline.
    r.send({ type: "timer.fired", kind: "sleep", node: "s1" }, T0 + HOUR + 1);
    expect(r.run.lifecycle).toMatchObject({ status: "waiting", waiting_expires_at: T0 + HOUR + 1 + HOUR + 10_000 });
    expect(r.can({ type: "run.sweep", at })).toBe(false);
  });
});

describe("lost clocks and hand-overs", () => {
  it("a lease past expiry plus grace (its timer lost) is expired: worker_lost, and the step retries", () => {
    const r = runner(oneStep, { lease_ttl_ms: 30_000 });
    const first = (r.send({ type: "run.create", run: seed() }).find((e) => e.channel === "step.ready")!.payload! as { request: Record<string, number> })
      .request;
    // Granted in memory and running: an offer its scheduler still holds is never repaired, whatever its age.
    expect(r.can({ type: "run.sweep", at: T0 + 1_000_000, held: ["t_1/a/1"] })).toBe(false);
    // A long attempt: its heartbeat leases it durably (until then it had no lease to expire).
    r.send({ type: "step.heartbeat", node: "a", attempt: first.attempt, lease_epoch: first.lease_epoch });
    const expires = r.run.nodes.a!.lease_expires_at!;
    expect(expires).toBe(T0 + 30_000);
    expect(r.can({ type: "run.sweep", at: expires + DEFAULT_SWEEP.lease_grace_ms - 1 })).toBe(false);
    const at = expires + DEFAULT_SWEEP.lease_grace_ms;
    const effects = r.send({ type: "run.sweep", at });
    expect(r.run.nodes.a!.step).toMatchObject({ status: "ready", last_error: { code: "worker_lost" } });
    // Retried under the step's policy: after its backoff.
    const timer = effects.find((e) => e.type === "runway.timer.set") as { at: number; event: object } | undefined;
    expect(timer?.event).toMatchObject({ type: "timer.fired", kind: "retry", node: "a" });
    const retry = (r.send(timer!.event, timer!.at).find((e) => e.channel === "step.ready")!.payload! as { request: Record<string, number> }).request;
    expect(retry).toMatchObject({ node: "a", attempt: 2 });
    expect(retry.lease_epoch).toBeGreaterThan(first.lease_epoch!);
    expect(effects).toContainEqual({ type: "runway.local", channel: "metrics", payload: { counter: "sweep_actions", tenant: "t", action: "expire_lease" } });
    // The lost attempt's late report is a zombie's.
    expect(r.send({ type: "step.result", node: "a", attempt: 1, lease_epoch: first.lease_epoch, outcome: "succeeded" })).toContainEqual({
      type: "runway.answer",
      value: { outcome: "stale_lease" },
    });
  });

  it("an offer lost on its way to the scheduler is offered again (same ticket) once it is old enough", () => {
    const r = runner(oneStep);
    const offer = r.send({ type: "run.create", run: seed() }).find((e) => e.channel === "step.ready")!.payload!;
    expect(r.can({ type: "run.sweep", at: T0 + DEFAULT_SWEEP.reoffer_after_ms - 1 })).toBe(false);
    const again = r.send({ type: "run.sweep", at: T0 + DEFAULT_SWEEP.reoffer_after_ms }, T0 + 7).find((e) => e.channel === "step.ready")!.payload!;
    expect(again.id).toBe(offer.id);
    // Stamped with the actor's clock, not the sweeper's.
    expect(r.run.nodes.a!.offered_at).toBe(T0 + 7);
  });

  it("a map's items that were never offered are its own pacing, not a lost hand-over", () => {
    const p = plan({ name: "w", nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "h", concurrency: 1, max_fanout: 10 }] });
    const r = runner(p, { scheduled: true });
    r.send({ type: "run.create", run: seed({ input: { list: [1, 2, 3] } }) });
    const plans = sweepPlan(r.run, T0 + DEFAULT_SWEEP.reoffer_after_ms);
    expect(plans).toEqual([{ action: "reoffer", node: "m", item: 0 }]);
    const effects = r.send({ type: "run.sweep", at: T0 + DEFAULT_SWEEP.reoffer_after_ms });
    expect(effects.filter((e) => e.channel === "step.ready").map((e) => e.payload!.item)).toEqual([0]);
  });
});

describe("a child whose parent is gone", () => {
  const tree = plan({ name: "w", nodes: [{ id: "sub", kind: "subworkflow", workflow: "leaf" }] });
  const prepared = { child_ids: { sub: "t_c2" }, child_definitions: { leaf: { name: "leaf", version: 1, digest: "d2" } } };

  it("parentGone: missing, ended, or no longer waiting on this child at its node", () => {
    const child = runner(oneStep);
    child.send({
      type: "run.create",
      run: seed({ id: "t_c", root_run_id: "t_p", parent_run_id: "t_p", parent_node: "sub", depth: 1, lane: "batch" }),
      parent: parentOf("t_p"),
    });
    const parent = runner(tree, prepared);
    parent.send({ type: "run.create", run: seed({ id: "t_p", root_run_id: "t_p" }) }, T0);
    expect(parent.run.nodes.sub).toMatchObject({ s: "active", child: "t_c2" });
    expect(parentGone(child.run, null)).toBe(true);
    expect(parentGone(child.run, parent.run)).toBe(true); // the parent waits on another child
    expect(parentGone(child.run, { ...parent.run, nodes: { sub: { ...parent.run.nodes.sub!, child: "t_c" } } })).toBe(false);
    parent.send({ type: "run.cancel", reason: "stop", by: "test" });
    expect(parentGone(child.run, { ...parent.run, nodes: { sub: { ...parent.run.nodes.sub!, child: "t_c" } } })).toBe(true);
    const top = runner(oneStep);
    top.send({ type: "run.create", run: seed() });
    expect(parentGone(top.run, null)).toBe(false);
  });

  /** A child run `t_m` of `t_p`, itself running a child. */
  const middle = () => {
    const mid = runner(tree, prepared);
    mid.send({
      type: "run.create",
      run: seed({ id: "t_m", root_run_id: "t_p", parent_run_id: "t_p", parent_node: "sub", depth: 1, lane: "batch" }),
      parent: parentOf("t_p"),
    });
    return mid;
  };

  it("run.parent_gone ends the child failed/parent_gone and tells its own children the same", () => {
    const mid = middle();
    const effects = mid.send({ type: "run.parent_gone", parent_status: "failed" });
    expect(mid.run.lifecycle.status).toBe("failed");
    expect(mid.run.error).toMatchObject({ code: "parent_gone" });
    expect(mid.run.nodes.sub!.s).toBe("cancelled");
    expect(effects).toContainEqual({ type: "runway.send", to: { kind: "run", id: "t_c2" }, event: { type: "run.cancel", reason: "parent_gone", by: "t_m" } });
    const top = runner(oneStep);
    top.send({ type: "run.create", run: seed() });
    expect(top.can({ type: "run.parent_gone", parent_status: "missing" })).toBe(false);
  });

  it("C097 run.parent_gone of a cancelled parent (its cancel delayed or lost, the sweep found it first) is that cancel: the child ends cancelled and cancels its own children", () => {
    const mid = middle();
    const effects = mid.send({ type: "run.parent_gone", parent_status: "cancelled" });
    expect(mid.run.lifecycle.status).toBe("cancelled");
    expect(mid.run.cancel).toMatchObject({ reason: "parent_cancelled", by: "t_p" });
    expect(effects).toContainEqual({
      type: "runway.send",
      to: { kind: "run", id: "t_c2" },
      event: { type: "run.cancel", reason: "parent_cancelled", by: "t_m" },
    });
  });
});

describe("recovery on a partition claim", () => {
  it("fails only attempts not still executing in the claiming process: one the node claims again while it runs is kept", () => {
    const r = runner(oneStep, { lease_ttl_ms: 30_000 });
    const exec = (r.send({ type: "run.create", run: seed() }).find((e) => e.channel === "step.ready")!.payload! as { request: Record<string, number> }).request;
    const alive = [{ node: "a", attempt: exec.attempt!, lease_epoch: exec.lease_epoch! }];
    // Granted and still running here (no write yet): nothing is lost, so nothing is written.
    expect(r.can({ type: "run.recover", reason: "partition_claimed", alive })).toBe(false);
    // Claimed by a process that does not run it: attempt 1 is lost (worker_lost) and attempt 2 offered at once.
    const again = r.send({ type: "run.recover", reason: "partition_claimed", alive: [] });
    expect(r.run.nodes.a).toMatchObject({ offered: 2, step: { attempt: 1, status: "ready", last_error: { code: "worker_lost" } } });
    expect(again.filter((e) => e.channel === "step.ready")).toHaveLength(1);
    // Attempt 1's late report (a zombie in the lost process) is refused.
    expect(r.send({ type: "step.result", node: "a", attempt: 1, lease_epoch: 1, outcome: "succeeded" })).toEqual([
      { type: "runway.answer", value: { outcome: "stale_lease" } },
    ]);
    // Leased durably by a heartbeat, then lost: it fails worker_lost and attempt 3 is offered at once.
    r.send({ type: "step.heartbeat", node: "a", attempt: 2, lease_epoch: 2 });
    expect(r.run.nodes.a!.step).toMatchObject({ attempt: 2, status: "running" });
    r.send({ type: "run.recover", reason: "partition_claimed", alive: [] });
    expect(r.run.nodes.a).toMatchObject({ offered: 3, step: { attempt: 2, status: "ready", last_error: { code: "worker_lost" } } });
  });

  it("41 after a hand-over by a live owner, its attempts are leased here, not failed: an offer until its first heartbeat is due, then lost if none came; a durable lease stands", () => {
    const r = runner(oneStep, { lease_ttl_ms: 30_000 });
    const exec = (r.send({ type: "run.create", run: seed() }).find((e) => e.channel === "step.ready")!.payload! as { request: Record<string, number> }).request;
    const now = T0 + 5_000;
    const effects = r.send({ type: "run.recover", reason: HANDED_OVER, alive: [] }, now);
    // Attempt 1 may be running on the owner that let the partition go: leased here under its number and epoch, till 5 s (its first heartbeat) + 5 s grace.
    expect(r.run.nodes.a!.step).toMatchObject({ attempt: exec.attempt, lease_epoch: exec.lease_epoch, status: "leased" });
    expect(r.run.nodes.a!.lease_expires_at).toBe(now + 10_000);
    expect(effects.filter((e) => e.channel === "step.ready")).toHaveLength(0);
    expect(effects).toContainEqual(expect.objectContaining({ type: "runway.timer.set", at: now + 10_000 }));
    // Its heartbeat, through the mailbox, renews it; its result is taken.
    r.send({ type: "step.heartbeat", node: "a", attempt: 1, lease_epoch: 1 }, now + 1_000);
    expect(r.run.nodes.a!.lease_expires_at).toBe(now + 1_000 + 30_000);
    r.send({ type: "step.result", node: "a", attempt: 1, lease_epoch: 1, outcome: "succeeded", output: 7 }, now + 2_000);
    expect(r.run.lifecycle.status).toBe("succeeded");

    // Never run there (its ticket dropped with the owner's queue): no heartbeat, and the lease's timer fails it worker_lost.
    const q = runner(oneStep, { lease_ttl_ms: 30_000 });
    q.send({ type: "run.create", run: seed() });
    q.send({ type: "run.recover", reason: HANDED_OVER, alive: [] }, now);
    const retried = q.send({ type: "timer.fired", kind: "lease", node: "a", attempt: 1, lease_epoch: 1 }, now + 10_000);
    expect(q.run.nodes.a!.step).toMatchObject({ attempt: 1, status: "ready", last_error: { code: "worker_lost" } });
    // Retried under the node's policy (offered again, or after its backoff).
    expect(retried.some((e) => e.channel === "step.ready" || (e.type === "runway.timer.set" && "name" in e && String(e.name).startsWith("retry-")))).toBe(true);
  });

  it("41 an attempt failed worker_crashed by its node (a node stopping destroys its pool) is retried outside the node's own retries", () => {
    const r = runner(oneStep, { lease_ttl_ms: 30_000 });
    r.send({ type: "run.create", run: seed() });
    r.send({
      type: "step.result",
      node: "a",
      attempt: 1,
      lease_epoch: 1,
      outcome: "failed",
      error: { code: "worker_crashed", message: "pool destroyed", retryable: true },
    });
    expect(r.run.nodes.a!.step).toMatchObject({ status: "ready", attempt: 1, last_error: { code: "worker_crashed" } });
    expect(r.run.lifecycle.status).toBe("running");
  });

  it("41 an attempt that journaled a call's intent, then went silent while its node still serves the run, lapses at its lease's end, worker_lost", () => {
    const r = runner(oneStep, { lease_ttl_ms: 30_000 });
    r.send({ type: "run.create", run: seed() });
    const intent = {
      type: "effect.intent",
      node: "a",
      attempt: 1,
      lease_epoch: 1,
      cancellation_epoch: 0,
      key: "k1",
      server: "s",
      tool: "t",
      class: "non_idempotent",
      arguments: {},
    };
    const effects = r.send(intent, T0 + 100);
    expect(r.run.nodes.a!.step).toMatchObject({ attempt: 1, status: "leased" });
    expect(r.run.nodes.a!.lease_expires_at).toBe(T0 + 100 + 30_000);
    expect(effects).toContainEqual(expect.objectContaining({ type: "runway.timer.set", at: T0 + 100 + 30_000 }));
    // A second intent of the same attempt takes no new lease: only heartbeats renew it.
    r.send({ ...intent, key: "k2" }, T0 + 200);
    expect(r.run.nodes.a!.lease_expires_at).toBe(T0 + 100 + 30_000);
    r.send({ type: "timer.fired", kind: "lease", node: "a", attempt: 1, lease_epoch: 1 }, T0 + 100 + 30_000);
    expect(r.run.nodes.a!.step).toMatchObject({ attempt: 1, status: "ready", last_error: { code: "worker_lost" } });
  });
});
