import { afterEach, expect, it, vi } from "vitest";
import { Dispatcher, type QuotaGate } from "../../actors/index.js";
import { Ring } from "../../actors/engine/ring.js";
import type { ReadyTicket, TenantPolicy } from "../../machines/index.js";
import { createLogger } from "../../runtime/index.js";

/**
 * The dispatcher's use of tenant policies. A grant hands the ticket's attempt to the executor; a
 * recording stand-in for the executor is enough here (no NATS is involved in a grant decision).
 */
const T0 = 1_700_000_000_000;
const dispatchers: Dispatcher[] = [];
afterEach(() => {
  for (const d of dispatchers.splice(0)) d.stop();
});

/** `extra`: bounds, a quota, or other settings over the defaults. */
function world(policy: (tenant: string) => TenantPolicy | undefined, extra: Partial<ConstructorParameters<typeof Dispatcher>[0]> = {}) {
  const grants: string[] = [];
  const d = new Dispatcher({
    execute: (request) => grants.push(request.node),
    clock: { now: () => T0, monotonic: () => 0 },
    logger: createLogger("dispatcher", "error"),
    config: { slots: 4, interactive_reserve: 0, migration_cap: 1, aging_ms: 10_000 },
    policy,
    ...extra,
  });
  dispatchers.push(d);
  return { d, grants };
}

const ticket = (tenant: string, node: string): ReadyTicket => ({
  id: `${tenant}_r/${node}/1`,
  run: `${tenant}_r`,
  node,
  attempt: 1,
  tenant,
  project: "default",
  class: "automation",
  priority: 5,
  deadline: null,
  cost: 1,
  enqueued_at: T0,
  request: {
    run: `${tenant}_r`,
    root: `${tenant}_r`,
    tenant,
    node,
    attempt: 1,
    lease_epoch: 1,
    handler: "h",
    input: null,
    timeout_ms: 1_000,
    cancellation_epoch: 0,
    ticket: `${tenant}_r/${node}/1`,
    lease_after_ms: 5_000,
  },
});

it("a tenant whose policy this node has not read yet is granted nothing (never default settings); once its policy arrives it is granted at once", async () => {
  const known = new Map<string, TenantPolicy>();
  const { d, grants } = world((t) => known.get(t));
  d.offer(ticket("t", "a"));
  d.offer(ticket("t", "b"));
  await Promise.resolve();
  expect(grants).toEqual([]);
  known.set("t", { weight: 1, max_concurrency: 10 });
  d.policyChanged();
  await Promise.resolve();
  expect(grants.sort()).toEqual(["a", "b"]);
});

it("a killed tenant's policy, once read, keeps its tickets waiting", async () => {
  const { d, grants } = world(() => ({ weight: 1, max_concurrency: 10, killed: true }));
  d.offer(ticket("k", "a"));
  d.policyChanged();
  await Promise.resolve();
  expect(grants).toEqual([]);
  expect(d.metrics(T0).queued).toBe(1);
});

it("the lease decisions a dispatcher keeps are bounded: after 50 grants with a bound of 8, the last 8, found by decision number", async () => {
  const { d, grants } = world(() => ({ weight: 1, max_concurrency: 10 }), { recentLimit: 8 });
  for (let i = 0; i < 50; i++) {
    const t = ticket("t", `n${i}`);
    d.offer(t);
    await Promise.resolve();
    d.done(t.id);
  }
  expect(grants).toHaveLength(50);
  expect(d.decisionCount).toBe(50);
  expect(d.recentSince(0).map((x) => x.seq)).toEqual([43, 44, 45, 46, 47, 48, 49, 50]);
  expect(d.recentSince(47).map((x) => x.seq)).toEqual([48, 49, 50]);
  expect(d.recentSince(50)).toEqual([]);
});

it("a ring keeps the last items pushed, oldest first, in fixed memory", () => {
  const ring = new Ring<number>(3);
  expect(ring.toArray()).toEqual([]);
  for (let i = 1; i <= 2; i++) ring.push(i);
  expect(ring.toArray()).toEqual([1, 2]);
  for (let i = 3; i <= 7; i++) ring.push(i);
  expect(ring.toArray()).toEqual([5, 6, 7]);
  expect(ring.length).toBe(3);
  expect(() => new Ring(0)).toThrow(RangeError);
});

it("an attempt whose handler returned frees its slot at once (the next is granted while its report commits) and stays held until it is done; at most `slots` attempts commit without a slot", async () => {
  const { d, grants } = world(() => ({ weight: 1, max_concurrency: 100 }));
  const tickets = Array.from({ length: 12 }, (_, i) => ticket("t", `n${i}`));
  for (const t of tickets) d.offer(t);
  await Promise.resolve();
  expect(grants).toEqual(["n0", "n1", "n2", "n3"]);
  // n0..n3 returned: four more start while their reports commit; all are still held.
  for (const t of tickets.slice(0, 4)) d.free(t.id);
  expect(grants).toHaveLength(8);
  expect(d.held("t_r")).toHaveLength(12);
  expect(d.metrics(T0).running).toBe(4);
  // Four commit without a slot already (the bound is the slot count): n4..n7 keep theirs until done.
  for (const t of tickets.slice(4, 8)) d.free(t.id);
  expect(grants).toHaveLength(8);
  d.done(tickets[0]!.id);
  expect(grants).toHaveLength(8);
  d.free(tickets[4]!.id);
  expect(grants).toEqual(["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"]);
  // Done after free frees nothing twice; done without free frees the slot.
  for (const t of tickets.slice(1, 5)) d.done(t.id);
  expect(grants).toHaveLength(9);
  d.done(tickets[5]!.id);
  expect(grants).toHaveLength(10);
  expect(d.held("t_r")).toHaveLength(12 - 6);
});

it("a dropped ticket leaves the scheduler's queue with its offer: counted queued no more, and the next free slot goes to the ticket behind it", () => {
  const { d, grants } = world(() => ({ weight: 1, max_concurrency: 1 }));
  d.offer(ticket("acme", "a"));
  d.offer(ticket("acme", "b"));
  d.offer(ticket("acme", "c"));
  expect(grants).toEqual(["a"]);
  expect(d.metrics(T0).queued).toBe(2);
  d.drop({ run: "acme_r", reason: "cancelled", attempts: [{ node: "b", attempt: 1, lease_epoch: 1 }] });
  expect(d.metrics(T0).queued).toBe(1);
  expect(d.held("acme_r").sort()).toEqual(["acme_r/a/1", "acme_r/c/1"]);
  d.done("acme_r/a/1");
  expect(grants).toEqual(["a", "c"]);
  expect(d.metrics(T0).queued).toBe(0);
});

it("an attempt this scheduler holds is alive to a recovery in this process while queued, granted, or waiting for its provider's next quota window; one dropped while it waits is not offered again", async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "setInterval"] });
  try {
    const takes: string[] = [];
    // The provider's window is full: every take is refused until 20 ms on.
    const quota = { take: async (_t: string, _p: string, _l: unknown, _c: number, now: number) => (takes.push("take"), { ok: false, retry_at: now + 20 }) };
    const { d, grants } = world(() => ({ weight: 1, max_concurrency: 10 }), {
      config: { slots: 1, interactive_reserve: 0, migration_cap: 1, aging_ms: 10_000 },
      quotaOf: (_tenant, provider) => (provider === "llm" ? { requests: 1 } : undefined),
      quota: quota as unknown as QuotaGate,
    });
    const alive = () =>
      d
        .alive("t_r")
        .map((a) => a.node)
        .sort();
    d.offer(ticket("t", "plain"));
    d.offer({ ...ticket("t", "bound"), provider_key: "llm" });
    // `plain` holds the one slot: `bound` is queued.
    expect(grants).toEqual(["plain"]);
    expect(alive()).toEqual(["bound", "plain"]);
    d.done(ticket("t", "plain").id);
    // `bound` is granted, its quota being taken; then it waits off the queue for the next window.
    expect(alive()).toEqual(["bound"]);
    await vi.advanceTimersByTimeAsync(0);
    expect(takes).toHaveLength(1);
    expect(d.held("t_r")).toEqual([ticket("t", "bound").id]);
    expect(alive()).toEqual(["bound"]);
    d.drop({ run: "t_r", reason: "cancelled", attempts: [{ node: "bound", attempt: 1, lease_epoch: 1 }] });
    expect(alive()).toEqual([]);
    await vi.advanceTimersByTimeAsync(100);
    expect(takes).toHaveLength(1);
    expect(grants).toEqual(["plain"]);
  } finally {
    vi.useRealTimers();
  }
});

it("an agent's attempt gives its worker slot back as it is granted: three running agents leave all four slots to code steps, and their end frees nothing twice", async () => {
  const { d, grants } = world(() => ({ weight: 1, max_concurrency: 100 }));
  const agentTicket = (node: string): ReadyTicket => {
    const t = ticket("t", node);
    return { ...t, request: { ...t.request, agent: { model: "p/m", instructions: "", tools: [] } as never } };
  };
  for (const n of ["a1", "a2", "a3"]) d.offer(agentTicket(n));
  for (const n of ["c1", "c2", "c3", "c4", "c5"]) d.offer(ticket("t", n));
  await Promise.resolve();
  // The agents run and hold no slot: the four slots hold c1–c4; c5 waits for one.
  expect(grants.sort()).toEqual(["a1", "a2", "a3", "c1", "c2", "c3", "c4"]);
  for (const n of ["a1", "a2", "a3"]) d.done(`t_r/${n}/1`);
  await Promise.resolve();
  expect(grants).not.toContain("c5");
  d.done("t_r/c1/1");
  await Promise.resolve();
  expect(grants).toContain("c5");
});
