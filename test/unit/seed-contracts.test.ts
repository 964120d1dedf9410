import { describe, expect, it } from "vitest";
import {
  emptyScheduler,
  enqueue,
  next,
  type SchedulerConfig,
  type SchedulerState,
  type TenantPolicy,
  type TicketInput,
} from "../../machines/scheduler/index.js";
import type { ExecuteRequest } from "../../machines/index.js";
import { executes, plan, rootSeed, runDriver, type Emitted } from "./run-driver.js";
import { lookup, T0 } from "./scheduler-support.js";

/** Seed 004 contract rows of issue 41 §3 on the pure machines: the child's ticket and its share, a map batch's approval, raised faults and ceilings. */

const ready = (effects: Emitted[]) => effects.filter((e) => e.channel === "step.ready").map((e) => e.payload as TicketInput & { run: string });

describe("a child run's tickets (C121)", () => {
  it("C121 an invoked child's step tickets carry its own tenant and the batch class, and the scheduler charges them to that tenant's batch share, not a shared one", () => {
    // The parent is interactive: the child it starts is batch whatever its parent's lane.
    const parentPlan = plan({ name: "top", nodes: [{ id: "sub", kind: "subworkflow", workflow: "leaf" }] });
    const parent = runDriver(parentPlan, { child_ids: { sub: "acme_c" }, child_definitions: { leaf: { name: "leaf", version: 1, digest: "d2" } } }, T0);
    const created = parent
      .send({ type: "run.create", run: rootSeed({ id: "acme_p", root_run_id: "acme_p", tenant: "acme", lane: "interactive" }) })
      .find((e) => e.type === "runway.send" && e.event?.type === "run.create");
    const childRun = created!.event!.run as Record<string, unknown>;
    expect(childRun).toMatchObject({ id: "acme_c", tenant: "acme", lane: "batch" });

    const leafPlan = plan({ name: "leaf", nodes: [{ id: "a", kind: "code", handler: "h" }] });
    const tickets = ["acme_c", "acme_c2"].map((id) => {
      const child = runDriver(leafPlan, {}, T0);
      const parentView = { status: "running", tenant: "acme", root_run_id: "acme_p", depth: 0, waits: true };
      const [ticket] = ready(child.send({ type: "run.create", run: { ...childRun, id, start_key: `acme_p:${id}` }, parent: parentView }));
      return ticket!;
    });
    for (const t of tickets) expect(t).toMatchObject({ tenant: "acme", class: "automation" });

    // Two slots; each tenant's batch (automation) work may hold half of them. The second acme
    // child waits on acme's share while another tenant's batch ticket takes the free slot.
    const config: SchedulerConfig = { slots: 2, interactive_reserve: 0, migration_cap: 0, aging_ms: 60_000 };
    const policy: TenantPolicy = { weight: 1, max_concurrency: 10, class_shares: { automation: 0.5 } };
    const tenants = lookup({ acme: policy, other: policy });
    let s: SchedulerState = emptyScheduler();
    for (const t of tickets) s = enqueue(s, { ...t, enqueued_at: T0 });
    s = enqueue(s, { id: "o1", tenant: "other", project: "default", class: "automation", priority: 5, deadline: null, enqueued_at: T0 + 1 });
    const leased: string[] = [];
    for (let d = next(s, { now: T0 + 2, config, tenants, buckets: {} }); d.decision === "lease"; d = next(s, { now: T0 + 2, config, tenants, buckets: {} })) {
      s = d.state;
      leased.push(d.ticket.id);
    }
    expect(leased.sort()).toEqual([tickets[0]!.id, "o1"].sort());
    expect(s.tenants.acme!.leased.map((t) => t.id)).toEqual([tickets[0]!.id]);
    expect(s.tenants.acme!.vtime).toBeGreaterThan(0);
    expect(s.tenants.acme!.queued.automation).toBe(1);
    expect(s.tenants.other!.leased.map((t) => t.id)).toEqual(["o1"]);
  });
});

describe("a map item's call that needs approval (C067)", () => {
  const needsApproval = { code: "tool_needs_approval", message: "pay/find is gated", retryable: false };
  const aborted = (effects: Emitted[]) =>
    effects.filter((e) => e.channel === "step.abort").flatMap((e) => (e.payload as { attempts: { item?: number }[] }).attempts.map((a) => a.item));

  it("C067 the first item whose call needs approval cancels the batch and fails the map read_tool_needs_approval; continue_on_error does not keep the run, and no retry is spent", () => {
    const p = plan({
      name: "w",
      nodes: [
        {
          id: "m",
          kind: "map",
          items: "${input.list}",
          handler: "h",
          concurrency: 3,
          max_fanout: 5,
          continue_on_error: true,
          retry: { max_attempts: 3, backoff_ms: 10, max_backoff_ms: 10 },
        },
        { id: "after", kind: "code", handler: "h", needs: [{ node: "m", when: "always" }] },
      ],
    });
    const r = runDriver(p, {}, T0);
    const batch = executes(r.send({ type: "run.create", run: rootSeed({ input: { list: [0, 1, 2, 3, 4] } }) }));
    expect(batch.map((e) => e.item)).toEqual([0, 1, 2]);
    expect(executes(r.result(batch[0]!, "succeeded", 0)).map((e) => e.item)).toEqual([3]);
    const effects = r.result(batch[1]!, "failed", undefined, needsApproval);
    expect(executes(effects)).toEqual([]);
    expect(aborted(effects)).toEqual([2, 3]);
    expect(r.run.nodes.m).toMatchObject({ s: "failed", error: { code: "read_tool_needs_approval", message: expect.stringContaining("item #1") } });
    expect(r.run.nodes.after!.s).toBe("cancelled");
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "read_tool_needs_approval", nodes: ["m"] });
    // Its retries were not spent: nothing was offered again, and the aborted item's late report starts nothing.
    expect(executes(r.result(batch[2]!, "failed", undefined, { code: "aborted", message: "aborted", retryable: true }))).toEqual([]);
    expect(r.run.lifecycle.status).toBe("failed");
  });

  it("C067 outside a map the same failure is the author's to tolerate, and a child that ended read_tool_needs_approval fails its parent's node child_failed, tolerably", () => {
    const one = plan({
      name: "w",
      nodes: [
        { id: "a", kind: "code", handler: "h", continue_on_error: true },
        { id: "after", kind: "code", handler: "h", needs: [{ node: "a", when: "always" }] },
      ],
    });
    const r = runDriver(one, {}, T0);
    const [a] = executes(r.send({ type: "run.create", run: rootSeed() }));
    expect(executes(r.result(a!, "failed", undefined, needsApproval)).map((e) => e.node)).toEqual(["after"]);
    expect(r.run.lifecycle.status).toBe("running");

    const parentPlan = plan({
      name: "top",
      nodes: [
        { id: "sub", kind: "subworkflow", workflow: "leaf", continue_on_error: true },
        { id: "after", kind: "code", handler: "h", needs: [{ node: "sub", when: "always" }] },
      ],
    });
    const parent = runDriver(parentPlan, { child_ids: { sub: "t_c" }, child_definitions: { leaf: { name: "leaf", version: 1, digest: "d2" } } }, T0);
    parent.send({ type: "run.create", run: rootSeed() });
    const settled = parent.send({
      type: "child.settled",
      node: "sub",
      child: "t_c",
      status: "failed",
      error: { code: "read_tool_needs_approval", message: "m: item #1: gated" },
    });
    expect(executes(settled).map((e) => e.node)).toEqual(["after"]);
    expect(parent.run.nodes.sub!.error).toMatchObject({ code: "child_failed" });
    expect(parent.run.lifecycle.status).toBe("running");
  });
});

/**
 * C065 and C066, decided for Runway. The seed retries a wide step as one unit and lets the first
 * raised exception cancel its batch because its step is the unit of memoization. Here each map
 * item is its own step, with its own journal entry, lease and retry policy: a raised failure or a
 * lost worker is settled for that item alone, and the siblings' work (paid for, journaled) is
 * kept. What cancels a batch at once is a returned platform stop (C063, C064) or an approval
 * (C067).
 */
describe("raised faults in a map batch (C065, C066: decided)", () => {
  const aborts = (effects: Emitted[]) =>
    effects.filter((e) => e.channel === "step.abort").flatMap((e) => (e.payload as { attempts: { item?: number }[] }).attempts.map((a) => a.item));
  const retry = { max_attempts: 3, backoff_ms: 1_000, max_backoff_ms: 1_000 };
  const list = (n: number) => rootSeed({ input: { list: Array.from({ length: n }, (_, i) => i) } });

  it("C065 a raised handler failure in a batch whose call ceiling answered aborts no sibling: in-flight items drain, and the failure before the stop fails the map map_item_failed", () => {
    const p = plan({
      name: "w",
      limits: { max_tool_calls: 1 },
      nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "h", concurrency: 3, max_fanout: 10 }],
    });
    const r = runDriver(p, {}, T0);
    const [i0, i1, i2] = executes(r.send({ type: "run.create", run: list(4) }));
    const intent = (e: ExecuteRequest) =>
      r.send({
        type: "effect.intent",
        node: e.node,
        item: e.item,
        attempt: e.attempt,
        lease_epoch: e.lease_epoch,
        cancellation_epoch: e.cancellation_epoch,
        key: `k${e.item}`,
        server: "fx",
        tool: "find",
        class: "read_only",
        arguments: {},
      });
    intent(i0!);
    // Item 1's call meets the ceiling: the map stops at position 1 and drains.
    expect(intent(i1!).find((e) => e.type === "runway.answer")?.value).toEqual({ outcome: "limit_reached" });
    const raised = r.result(i0!, "failed", undefined, { code: "handler_error", message: "boom", retryable: false });
    expect(aborts(raised)).toEqual([]);
    expect(executes(raised)).toEqual([]);
    expect(r.run.lifecycle.status).toBe("running");
    r.result(i2!, "succeeded", 2);
    expect(r.run.nodes.m!.error).toMatchObject({ code: "map_item_failed" });
    expect(r.run.lifecycle.status).toBe("failed");
    expect(r.run.error).toMatchObject({ code: "node_failed", nodes: ["m"] });
  });

  it("C066 a retryable platform fault in one item retries that item alone under a new lease epoch; its siblings are not aborted, their journaled results are kept, and the run succeeds", () => {
    const p = plan({ name: "w", nodes: [{ id: "m", kind: "map", items: "${input.list}", handler: "h", concurrency: 3, max_fanout: 10, retry }] });
    const r = runDriver(p, {}, T0);
    const [i0, i1, i2] = executes(r.send({ type: "run.create", run: list(3) }));
    r.result(i0!, "succeeded", "r0");
    const crashed = r.result(i1!, "failed", undefined, { code: "worker_crashed", message: "the worker thread died", retryable: true });
    expect(aborts(crashed)).toEqual([]);
    expect(executes(crashed)).toEqual([]);
    expect(r.run.nodes.m!.s).toBe("active");
    r.result(i2!, "succeeded", "r2");
    const [again] = executes(r.send({ type: "timer.fired", kind: "retry", node: "m", item: 1 }, T0 + 2_000));
    expect(again).toMatchObject({ item: 1, attempt: 2 });
    expect(again!.lease_epoch).toBeGreaterThan(i1!.lease_epoch);
    r.send(
      { type: "step.result", node: "m", item: 1, attempt: again!.attempt, lease_epoch: again!.lease_epoch, outcome: "succeeded", output: "r1" },
      T0 + 3_000,
    );
    expect(r.run.lifecycle.status).toBe("succeeded");
    expect(r.run.result).toEqual({ m: ["r0", "r1", "r2"] });
  });
});
