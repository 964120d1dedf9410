import { describe, expect, it } from "vitest";
import { Kvm } from "@nats-io/kv";
import { childStartKey, DEFINITIONS_BUCKET, runIdFor } from "../../actors/index.js";
import { waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * Seed 004 contract rows of issue 41 §3 on a real node: disabled and non-runnable definitions,
 * the child's pinned version, the snapshot bound at publish. Each test is named after the rows it
 * proves.
 */
const world = workflowWorld({ name: "seed-contracts-node" });

type View = RunAnswer & { definition: { name: string; version: number; digest: string } };
type Client = ReturnType<typeof world.clientFor>;

async function tenant(id: string): Promise<Client> {
  const client = world.clientFor(id);
  expect((await client.createTenant(id)).outcome).toMatch(/created|exists/);
  return client;
}

async function publish(client: Client, definition: object): Promise<{ version: number; digest: string }> {
  const put = await client.putDefinition(definition);
  expect(["published", "unchanged"], JSON.stringify(put).slice(0, 400)).toContain(put.outcome);
  return put as unknown as { version: number; digest: string };
}

const view = async (client: Client, id: string) => (await client.getRun(id)).run as View;
const until = (client: Client, id: string, status: string) =>
  waitFor(async () => (await view(client, id))?.status === status || undefined, { timeoutMs: 20_000, describe: `run ${id} to be ${status}` });

/** Every key the definitions bucket holds for tenant `t` (and the shared plan keys). */
async function definitionKeys(t: string): Promise<string[]> {
  const kv = await new Kvm(world.nc).open(DEFINITIONS_BUCKET);
  const keys: string[] = [];
  for await (const k of await kv.keys()) if (k.startsWith(`${t}.`) || k.startsWith("plan.")) keys.push(k);
  return keys.sort();
}

describe("definition lifecycle", () => {
  it("C004 a disabled definition refuses new top-level starts (definition_not_published, any version, no run written) while its run goes on and a parent admitted earlier starts it as a child; enabled, it starts again", async () => {
    const client = await tenant("sc3");
    const leaf = { name: "leaf", nodes: [{ id: "w", kind: "wait", signal: "go" }] };
    await publish(client, leaf);
    await publish(client, {
      name: "top",
      nodes: [
        { id: "go", kind: "wait", signal: "go" },
        { id: "sub", kind: "subworkflow", workflow: "leaf", needs: ["go"] },
      ],
    });
    const before = ((await client.startRun({ definition: "leaf" })).run as View).id;
    const top = ((await client.startRun({ definition: "top" })).run as View).id;
    await until(client, before, "waiting");
    await until(client, top, "waiting");

    expect(await client.setDefinitionDisabled("leaf", true)).toMatchObject({ outcome: "disabled", name: "leaf" });
    for (const request of [
      { definition: "leaf" },
      { definition: "leaf", version: 1 },
      { definition: "leaf", start_key: { source: "hook", delivery_id: "d1" } },
    ]) {
      const refused = await client.startRun(request);
      expect(refused, JSON.stringify(request)).toMatchObject({ outcome: "definition_not_published", reason: expect.stringContaining("disabled") });
    }
    expect((await client.getRun(runIdFor("sc3", "hook:d1"))).outcome).toBe("run_not_found");
    expect((await client.getDefinition("leaf")).outcome).toBe("found");

    // The run started before goes on; the parent admitted before starts its child normally.
    expect((await client.signal(before, "go")).outcome).toBe("delivered");
    expect((await settled(client, before)).status).toBe("succeeded");
    expect((await client.signal(top, "go")).outcome).toBe("delivered");
    const child = runIdFor("sc3", childStartKey(top, "sub"));
    await until(client, child, "waiting");
    expect((await client.signal(child, "go")).outcome).toBe("delivered");
    expect((await settled(client, top)).status).toBe("succeeded");

    expect((await client.setDefinitionDisabled("leaf", false)).outcome).toBe("enabled");
    expect((await client.startRun({ definition: "leaf" })).outcome).toBe("started");
    expect((await client.setDefinitionDisabled("nowhere", true)).outcome).toBe("definition_not_found");
  });

  it("C007 a definition of a kind that cannot run (a skill, a fragment) is refused at publish, before anything is stored; a start of it answers definition_not_found, no exception", async () => {
    const client = await tenant("sc4");
    const before = await definitionKeys("sc4");
    for (const kind of ["skill", "fragment"]) {
      const put = await client.putDefinition({ name: `a-${kind}`, kind, nodes: [{ id: "a", kind: "code", handler: "noop" }] });
      // The error names the kind: a definition is a workflow, and the only thing that runs.
      expect(put, kind).toMatchObject({ outcome: "invalid_definition", errors: [{ code: "invalid_definition", message: expect.stringContaining('"kind"') }] });
      expect((await client.putDefinition({ name: `a-${kind}`, kind, nodes: [{ id: "a", kind: "code", handler: "noop" }] }, false)).outcome).toBe(
        "invalid_definition",
      );
      expect((await client.startRun({ definition: `a-${kind}` })).outcome).toBe("definition_not_found");
    }
    expect(await definitionKeys("sc4")).toEqual(before);
  });
});

describe("trees", () => {
  it("C071 a child runs the version its parent pinned at publish, not the child's latest", async () => {
    const client = await tenant("sc1");
    const v1 = await publish(client, { name: "leaf", nodes: [{ id: "a", kind: "code", handler: "echo", input: "v1" }], result: "${steps.a.output}" });
    await publish(client, { name: "top", nodes: [{ id: "sub", kind: "subworkflow", workflow: "leaf" }], result: "${steps.sub.output}" });
    const v2 = await publish(client, { name: "leaf", nodes: [{ id: "a", kind: "code", handler: "echo", input: "v2" }], result: "${steps.a.output}" });
    expect([v1.version, v2.version]).toEqual([1, 2]);
    const top = ((await client.startRun({ definition: "top" })).run as View).id;
    expect((await settled(client, top)).status).toBe("succeeded");
    const child = await view(client, runIdFor("sc1", childStartKey(top, "sub")));
    expect(child.definition).toEqual({ name: "leaf", version: 1, digest: v1.digest });
    expect(child.result).toBe("v1");
    // A top-level start of the child takes its latest.
    const direct = ((await client.startRun({ definition: "leaf" })).run as View).id;
    expect((await settled(client, direct)).result).toBe("v2");
    expect((await view(client, direct)).definition).toEqual({ name: "leaf", version: 2, digest: v2.digest });
  });
});

describe("bounds", () => {
  const big = (name: string, bytes: number, extra: object[] = []) => ({
    name,
    nodes: [{ id: "a", kind: "code", handler: "echo", input: "x".repeat(bytes) }, ...extra],
  });

  it("C005 a run's snapshot (its compiled plan) above 256 KiB is refused snapshot_too_large at publish and nothing is stored; one below is stored whole, and a parent pins its children by digest, not by copy", async () => {
    const client = await tenant("sc2");
    const before = await definitionKeys("sc2");
    const refused = await client.putDefinition(big("fat", 300 * 1024));
    expect(refused).toMatchObject({ outcome: "invalid_definition", errors: [{ code: "snapshot_too_large" }] });
    expect(await definitionKeys("sc2")).toEqual(before);
    expect((await client.startRun({ definition: "fat" })).outcome).toBe("definition_not_found");
    // Nor can a parent pin it: it was never published.
    const parent = await client.putDefinition({ name: "holder", nodes: [{ id: "sub", kind: "subworkflow", workflow: "fat" }] });
    expect(parent).toMatchObject({ outcome: "invalid_definition", errors: [{ code: "unknown_workflow" }] });

    // Two children of 200 KiB each: each snapshot fits, and the parent's holds only their pins.
    const kids = [await publish(client, big("kid1", 200 * 1024)), await publish(client, big("kid2", 200 * 1024))];
    const tree = await publish(client, {
      name: "tree",
      nodes: [
        { id: "s1", kind: "subworkflow", workflow: "kid1" },
        { id: "s2", kind: "subworkflow", workflow: "kid2" },
      ],
    });
    const kv = await new Kvm(world.nc).open(DEFINITIONS_BUCKET);
    const stored = (digest: string) => kv.get(`plan.${digest}`).then((e) => e!.json<{ plan: { nodes: { input?: unknown }[] }; children: object }>());
    const kid = await stored(kids[0]!.digest);
    expect(kid.plan.nodes[0]!.input).toBe("x".repeat(200 * 1024));
    expect((await kv.get(`plan.${tree.digest}`))!.length).toBeLessThan(4 * 1024);
    expect((await stored(tree.digest)).children).toEqual({
      kid1: { name: "kid1", version: 1, digest: kids[0]!.digest },
      kid2: { name: "kid2", version: 1, digest: kids[1]!.digest },
    });
    const run = ((await client.startRun({ definition: "tree" })).run as View).id;
    expect((await settled(client, run)).status).toBe("succeeded");
  });
});

/** Issue 41 §3, "tests only": the rows above proven further down a tree and on a node's scheduler. */
describe("trees, further (C071, C005, C121)", () => {
  const big = (name: string, bytes: number, extra: object[] = []) => ({
    name,
    nodes: [{ id: "a", kind: "code", handler: "echo", input: "x".repeat(bytes) }, ...extra],
  });

  it("C071 the pin holds down the tree and over a republish while the parent runs: the child runs the version the parent pinned and the grandchild the one the child pinned; a top-level start takes the latest", async () => {
    const client = await tenant("sc7");
    const g1 = await publish(client, { name: "g", nodes: [{ id: "a", kind: "code", handler: "echo", input: "g1" }], result: "${steps.a.output}" });
    const c1 = await publish(client, { name: "c", nodes: [{ id: "sub", kind: "subworkflow", workflow: "g" }], result: "${steps.sub.output}" });
    await publish(client, {
      name: "top",
      nodes: [
        { id: "go", kind: "wait", signal: "go" },
        { id: "sub", kind: "subworkflow", workflow: "c", needs: ["go"] },
      ],
      result: "${steps.sub.output}",
    });
    const top = ((await client.startRun({ definition: "top" })).run as View).id;
    await until(client, top, "waiting");
    // Both levels move on while the parent waits: it still runs what it pinned at its publish.
    const g2 = await publish(client, { name: "g", nodes: [{ id: "a", kind: "code", handler: "echo", input: "g2" }], result: "${steps.a.output}" });
    const c2 = await publish(client, { name: "c", nodes: [{ id: "sub", kind: "subworkflow", workflow: "g" }], result: "c2:${steps.sub.output}" });
    expect([g2.version, c2.version]).toEqual([2, 2]);
    expect((await client.signal(top, "go")).outcome).toBe("delivered");
    expect(await settled(client, top)).toMatchObject({ status: "succeeded", result: "g1" });
    const child = runIdFor("sc7", childStartKey(top, "sub"));
    expect((await view(client, child)).definition).toEqual({ name: "c", version: 1, digest: c1.digest });
    expect((await view(client, runIdFor("sc7", childStartKey(child, "sub")))).definition).toEqual({ name: "g", version: 1, digest: g1.digest });
    const direct = ((await client.startRun({ definition: "c" })).run as View).id;
    expect(await settled(client, direct)).toMatchObject({ status: "succeeded", result: "c2:g2" });
    expect((await view(client, runIdFor("sc7", childStartKey(direct, "sub")))).definition).toEqual({ name: "g", version: 2, digest: g2.digest });
  });

  it("C005 across a pinned tree: each level's snapshot is bounded alone and stored whole, so three levels of 200 KiB publish and run; a republish of the pinned child above 256 KiB is refused snapshot_too_large, stores nothing, and the parent's pin and runs stay as they were", async () => {
    const client = await tenant("sc8");
    const g = await publish(client, big("g", 200 * 1024));
    const c = await publish(client, big("c", 200 * 1024, [{ id: "sub", kind: "subworkflow", workflow: "g" }]));
    const top = await publish(client, big("top", 200 * 1024, [{ id: "sub", kind: "subworkflow", workflow: "c" }]));
    const kv = await new Kvm(world.nc).open(DEFINITIONS_BUCKET);
    const stored = async (digest: string) => {
      const entry = await kv.get(`plan.${digest}`);
      const body = entry!.json<{ plan: { nodes: { input?: unknown }[]; definition_digest_input: string }; children?: object }>();
      // The bound is on the compiled plan's canonical text, which the plan also keeps as its digest's input.
      return { bytes: Buffer.byteLength(body.plan.definition_digest_input), ...body };
    };
    for (const [level, pin] of [
      [top, { c: { name: "c", version: 1, digest: c.digest } }],
      [c, { g: { name: "g", version: 1, digest: g.digest } }],
    ] as const) {
      const plan = await stored(level.digest);
      expect(plan.bytes).toBeGreaterThan(200 * 1024);
      expect(plan.bytes).toBeLessThan(256 * 1024);
      expect(plan.plan.nodes.find((n) => typeof n.input === "string")!.input).toBe("x".repeat(200 * 1024));
      expect(plan.children).toEqual(pin);
    }
    const first = ((await client.startRun({ definition: "top" })).run as View).id;
    expect((await settled(client, first)).status).toBe("succeeded");

    const before = await definitionKeys("sc8");
    const refused = await client.putDefinition(big("c", 300 * 1024, [{ id: "sub", kind: "subworkflow", workflow: "g" }]));
    expect(refused).toMatchObject({ outcome: "invalid_definition", errors: [{ code: "snapshot_too_large" }] });
    expect(await definitionKeys("sc8")).toEqual(before);
    expect(await client.getDefinition("c")).toMatchObject({ outcome: "found", ref: { version: 1, digest: c.digest } });
    expect((await stored(top.digest)).children).toEqual({ c: { name: "c", version: 1, digest: c.digest } });
    const again = ((await client.startRun({ definition: "top" })).run as View).id;
    expect((await settled(client, again)).status).toBe("succeeded");
    expect((await view(client, runIdFor("sc8", childStartKey(again, "sub")))).definition).toEqual({ name: "c", version: 1, digest: c.digest });
  });

  it("C121 on a node: the children an interactive parent starts run as their own tenant's batch work, held to that tenant's batch share, while another tenant's children are not held by it", async () => {
    // 16 slots on this node: sc9's batch (automation) work may hold ceil(0.125 × 16) = 2 of them; sc10 has no share set.
    const capped = world.clientFor("sc9");
    const free = world.clientFor("sc10");
    // Both tenants let the API start interactive runs: the parents are interactive, the children are not.
    expect((await capped.createTenant("sc9", { class_shares: { automation: 0.125 }, interactive_sources: ["api"] })).outcome).toBe("created");
    expect((await free.createTenant("sc10", { interactive_sources: ["api"] })).outcome).toBe("created");
    const fan = { name: "fan", nodes: Array.from({ length: 6 }, (_, i) => ({ id: `c${i}`, kind: "subworkflow", workflow: "leaf" })) };
    const leaf = { name: "leaf", nodes: [{ id: "s", kind: "code", handler: "slow", input: { ms: 800 } }] };
    for (const client of [capped, free]) {
      await publish(client, leaf);
      await publish(client, fan);
    }
    await world.node.tenants.get("sc9");
    const most = { sc9: 0, sc10: 0 };
    const sampler = setInterval(() => {
      const running = world.node.dispatcher!.metrics(Date.now()).running_by_tenant;
      most.sc9 = Math.max(most.sc9, running.sc9 ?? 0);
      most.sc10 = Math.max(most.sc10, running.sc10 ?? 0);
    }, 2);
    try {
      const parents = [
        ((await capped.startRun({ definition: "fan", lane: "interactive" })).run as View).id,
        ((await free.startRun({ definition: "fan", lane: "interactive" })).run as View).id,
      ];
      expect((await settled(capped, parents[0]!)).status).toBe("succeeded");
      expect((await settled(free, parents[1]!)).status).toBe("succeeded");
    } finally {
      clearInterval(sampler);
    }
    // The parent's steps are its children's: every attempt counted was a child's, charged to its tenant.
    expect(most.sc9).toBeGreaterThanOrEqual(1);
    expect(most.sc9).toBeLessThanOrEqual(2);
    expect(most.sc10).toBeGreaterThan(2);
  });
});
