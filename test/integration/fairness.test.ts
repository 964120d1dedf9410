import { describe, expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld();

const wide = (name: string, items: number) => ({ name, nodes: [{ id: "m", kind: "map", items: "${input.items}", handler: "noop", max_fanout: 1000 }] });

async function tenant(id: string, settings?: Record<string, unknown>): Promise<RunwayClient> {
  const client = world.clientFor(id);
  const created = await client.createTenant(id, settings);
  expect(["created", "exists"]).toContain(created.outcome);
  await client.putDefinition(wide("wide", 1000));
  await client.putDefinition({ name: "one", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
  await client.putDefinition({
    name: "slow",
    nodes: [
      { id: "a", kind: "code", handler: "slow", input: { ms: 800 } },
      { id: "b", kind: "code", needs: ["a"], handler: "noop" },
    ],
  });
  return client;
}

const items = (n: number) => ({ items: Array.from({ length: n }, (_, i) => i) });

describe("fair scheduling", () => {
  it("weighted share: tenants with weights 1:2:4 saturating the node receive leases in that ratio within 10% over 7,000 leases", async () => {
    const d = world.node.dispatcher!;
    const weights: Record<string, number> = { w1: 1, w2: 2, w4: 4 };
    const clients = await Promise.all(Object.entries(weights).map(([id, weight]) => tenant(id, { weight })));
    // Queue far more than 7,000 tickets: every tenant stays saturated for the whole window (each
    // holds at least 2.5 times what the window leases it). The starts alternate between the
    // tenants, so all three are backlogged from the first leases on: started one tenant after
    // another, the first one's work could be spent before the window opens.
    const runs: string[] = [];
    // Many runs of 100 items rather than a few of 1,000: a run's record carries its items.
    const counts = [40, 60, 100];
    const order = Array.from({ length: Math.max(...counts) }, (_, r) => clients.filter((_, i) => r < counts[i]!)).flat();
    await Promise.all(order.map(async (c) => runs.push(((await c.startRun({ definition: "wide", input: items(100), lane: "batch" })).run as RunAnswer).id)));
    const base = new Map(Object.keys(weights).map((t) => [t, d.leasesByTenant.get(t) ?? 0]));
    const total = () => Object.keys(weights).reduce((s, t) => s + (d.leasesByTenant.get(t) ?? 0) - base.get(t)!, 0);
    await waitFor(() => total() >= 7_000, { timeoutMs: 90_000, intervalMs: 5, describe: "7,000 leases" });
    const got = Object.fromEntries(Object.keys(weights).map((t) => [t, (d.leasesByTenant.get(t) ?? 0) - base.get(t)!]));
    const sum = Object.values(got).reduce((a, b) => a + b, 0);
    console.log(
      `weighted share over ${sum} leases: ${JSON.stringify(got)} (expected ${Object.entries(weights)
        .map(([t, w]) => `${t} ${Math.round((sum * w) / 7)}`)
        .join(", ")})`,
    );
    for (const [t, w] of Object.entries(weights)) {
      const expected = (sum * w) / 7;
      expect(Math.abs(got[t]! - expected) / expected, `${t}: ${got[t]} vs ${expected}`).toBeLessThan(0.1);
    }
    for (const id of runs) await settled(world.clientFor(id.split("_")[0]!), id);
  });

  it("interactive reserve: a flood of batch work queued by one tenant does not delay another tenant's interactive runs", async () => {
    const d = world.node.dispatcher!;
    const a = await tenant("flood");
    // The console is the tenant's interactive caller (C037: the lane comes from who asks).
    const b = await tenant("inter", { interactive_sources: ["console"] });
    const floods: string[] = [];
    for (let r = 0; r < 20; r++) floods.push(((await a.startRun({ definition: "wide", input: items(100), lane: "batch" })).run as RunAnswer).id);
    await waitFor(() => (d.leasesByTenant.get("flood") ?? 0) > 50, { timeoutMs: 20_000, describe: "the flood to be running" });
    const mark = d.decisionCount;
    const interactive: string[] = [];
    for (let r = 0; r < 20; r++) interactive.push(((await b.startRun({ definition: "one", lane: "interactive", source: "console" })).run as RunAnswer).id);
    await Promise.all(interactive.map((id) => settled(b, id)));
    const after = d.recentSince(mark);
    const inter = after.filter((x) => x.tenant === "inter");
    // Order, not time: between an interactive ticket's offer and its lease, no flood ticket was leased.
    const overtaken = inter.map((x) => after.filter((f) => f.tenant === "flood" && f.seq > x.offered_seq && f.seq < x.seq).length);
    console.log(
      `interactive reserve: 20 interactive leases while the flood had ${2000 - (d.leasesByTenant.get("flood") ?? 0)} queued; flood leases granted ahead of a waiting interactive ticket: ${overtaken.reduce((p, q) => p + q, 0)}`,
    );
    expect(inter).toHaveLength(20);
    expect(overtaken.every((n) => n === 0)).toBe(true);
    for (const id of floods) await settled(a, id);
  });

  it("migration never exceeds its cap, and uses idle capacity when nothing else waits", async () => {
    const d = world.node.dispatcher!;
    const c = await tenant("mover");
    await c.putDefinition({ name: "move", nodes: [{ id: "m", kind: "map", items: "${input.items}", handler: "slow", input: { ms: 30 }, max_fanout: 1000 }] });
    const runs: string[] = [];
    for (let r = 0; r < 3; r++) runs.push(((await c.startRun({ definition: "move", input: items(40), lane: "migration" })).run as RunAnswer).id);
    let max = 0;
    const cap = d["deps"].config.migration_cap;
    const sampler = setInterval(() => (max = Math.max(max, d.metrics(Date.now()).running_by_class.migration)), 2);
    try {
      for (const id of runs) expect((await settled(c, id)).status).toBe("succeeded");
    } finally {
      clearInterval(sampler);
    }
    console.log(`migration: at most ${max} running at once (cap ${cap}) over 120 attempts`);
    expect(max).toBeLessThanOrEqual(cap);
    expect(max).toBeGreaterThan(0);
  });

  it("kill switch: new starts are refused with a code; drain lets running steps finish and starts none", async () => {
    const c = await tenant("killme");
    const running = ((await c.startRun({ definition: "slow" })).run as RunAnswer).id;
    expect((await c.setTenantState("killme", "drain", "maintenance")).outcome).toBe("draining");
    expect((await c.startRun({ definition: "one" })).outcome).toBe("tenant_draining");
    // The step that was running finishes; the next one (b) is not started while draining.
    await waitFor(async () => ((await c.getRun(running)).run as RunAnswer).nodes.a!.status === "succeeded", {
      timeoutMs: 15_000,
      describe: "the running step to finish",
    });
    const parked = (await c.getRun(running)).run as RunAnswer;
    expect(parked.nodes.b!.status).toBe("active");
    expect(parked.nodes.b!.attempt).toBe(0);
    expect((await c.setTenantState("killme", "kill", "incident")).outcome).toBe("killed");
    expect((await c.startRun({ definition: "one" })).outcome).toBe("tenant_killed");
    expect((await c.setTenantState("killme", "resume")).outcome).toBe("active");
    expect((await settled(c, running)).status).toBe("succeeded");
    expect((await c.startRun({ definition: "one" })).outcome).toBe("started");
  });
});
