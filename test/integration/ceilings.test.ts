import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Msg } from "@nats-io/transport-node";
import { waitFor } from "../harness/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "ceilings-node" });
let fx: EffectsServerHandle;
beforeAll(async () => {
  fx = await startEffectsServer({ http: true });
  expect((await world.client.putToolServer({ name: "fx", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
}, 30_000);
afterAll(async () => {
  await fx?.stop();
});

type Ended = Omit<RunAnswer, "error" | "nodes"> & {
  partial_reason?: string;
  usage?: { steps: number; tool_calls: number };
  error: { code: string; message: string; partial_reason?: string } | null;
  nodes: Record<string, { status: string; error?: { code: string; message: string; partial_reason?: string } }>;
  created_at: number;
  started_at: number | null;
};

async function publish(...defs: object[]): Promise<void> {
  for (const def of defs) expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
}

async function begin(definition: string, input: unknown = {}): Promise<string> {
  return ((await world.client.startRun({ definition, input })).run as RunAnswer).id;
}

async function run(def: object, input: unknown = {}): Promise<Ended> {
  await publish(def);
  return (await world.settled(await begin((def as { name: string }).name, input))) as Ended;
}

it("the one status rule: a step ceiling reached after work is a success with partial_reason limit_reached and the work it did", async () => {
  const r = await run({
    name: "three-steps",
    limits: { max_steps: 2 },
    nodes: [
      { id: "a", kind: "code", handler: "echo", input: "A" },
      { id: "b", kind: "code", needs: ["a"], handler: "echo", input: "B" },
      { id: "c", kind: "code", needs: ["b"], handler: "echo", input: "C" },
    ],
  });
  expect(r.status).toBe("succeeded");
  expect(r.partial_reason).toBe("limit_reached");
  expect(r.result).toEqual({ a: "A", b: "B" });
  expect(r.nodes.c!.status).toBe("cancelled");
  expect(r.usage).toMatchObject({ steps: 2 });
});

it("a tool call beyond the run's max_tool_calls is never made: the server's counter proves it", async () => {
  const before = fx.counts().calls.charge ?? 0;
  const r = await run({
    name: "two-charges",
    limits: { max_tool_calls: 1 },
    nodes: [
      { id: "first", kind: "tool", server: "fx", tool: "charge", arguments: { account: "x", amount: 1 } },
      { id: "second", kind: "tool", needs: ["first"], server: "fx", tool: "charge", arguments: { account: "x", amount: 2 } },
    ],
  });
  expect(r.status).toBe("succeeded");
  expect(r.partial_reason).toBe("limit_reached");
  expect(r.result).toMatchObject({ first: { amount: 1 } });
  expect(fx.counts().calls.charge).toBe(before + 1);
});

it("a wall-clock ceiling reached before any work is a failure carrying the code; the stopped handler frees its worker", async () => {
  const r = await run({ name: "too-slow", limits: { max_wall_ms: 300 }, nodes: [{ id: "slow", kind: "code", handler: "slow", input: { ms: 20_000 } }] });
  expect(r.status).toBe("failed");
  expect(r.error).toMatchObject({ code: "limit_reached" });
  await waitFor(() => world.node.executor.inFlight === 0 || undefined, { timeoutMs: 10_000, describe: "the stopped handler to free its worker" });
});

it("a definition's limits are checked at publish", async () => {
  const bad = await world.client.putDefinition({ name: "bad-limits", limits: { max_steps: 0 }, nodes: [{ id: "a", kind: "code", handler: "echo" }] });
  expect(bad.outcome).toBe("invalid_definition");
});

it("C045 C050 a handler answering the money code itself is a plain node failure, and a handler's output holding partial_reason marks nothing", async () => {
  const failed = await run({
    name: "money-code",
    nodes: [
      { id: "a", kind: "code", handler: "echo", input: "A" },
      { id: "b", kind: "code", needs: ["a"], handler: "throws_code", input: { code: "budget_exhausted", message: "vendor quota spent" } },
    ],
  });
  expect(failed.status).toBe("failed");
  expect(failed.error).toMatchObject({ code: "node_failed" });
  expect(failed.error).not.toHaveProperty("partial_reason");
  expect(failed.partial_reason).toBeUndefined();
  expect(failed.nodes.b!.error!.message).toContain("budget_exhausted");

  const fields = { partial_reason: "limit_reached", meta: { partial_reason: "budget_exhausted" } };
  const ok = await run({ name: "marked-output", nodes: [{ id: "a", kind: "code", handler: "echo", input: fields }] });
  expect(ok.status).toBe("succeeded");
  expect(ok.partial_reason).toBeUndefined();
  expect(ok.result).toEqual({ a: fields });
});

it("C049 C050 an MCP tool answering the money code fails its child unmarked and the parent fails; a tool's result carrying partial_reason (in its content or _meta) marks nothing", async () => {
  await publish(
    {
      name: "quota-child",
      nodes: [{ id: "t", kind: "tool", server: "fx", tool: "answer", arguments: { text: "budget_exhausted: vendor quota spent", is_error: true } }],
    },
    {
      name: "quota-parent",
      nodes: [
        { id: "a", kind: "code", handler: "echo", input: "A" },
        { id: "sub", kind: "subworkflow", needs: ["a"], workflow: "quota-child" },
      ],
    },
  );
  const parent = (await world.settled(await begin("quota-parent"))) as Ended;
  expect(parent.status).toBe("failed");
  expect(parent.error).toMatchObject({ code: "node_failed", nodes: ["sub"] });
  expect(parent.partial_reason).toBeUndefined();
  expect(parent.nodes.sub!.error).toMatchObject({ code: "child_failed" });
  expect(parent.nodes.sub!.error).not.toHaveProperty("partial_reason");

  const marked = await run({
    name: "marked-tool",
    nodes: [
      {
        id: "t",
        kind: "tool",
        server: "fx",
        tool: "answer",
        arguments: { text: "done", structured: { partial_reason: "limit_reached" }, meta: { partial_reason: "budget_exhausted" } },
      },
    ],
  });
  expect(marked.status).toBe("succeeded");
  expect(marked.partial_reason).toBeUndefined();
  // The tool's own data is its output; its result's _meta is not: the gateway builds what the run keeps.
  expect(marked.result).toEqual({ t: { partial_reason: "limit_reached" } });
});

const WALL_CHILD = { name: "wall-child", limits: { max_wall_ms: 300 }, nodes: [{ id: "slow", kind: "code", handler: "slow", input: { ms: 20_000 } }] };

it("C046 a child stopped by its ceiling before any work carries the clock in its error; its parent node stops on that field: the parent is partial after work, failed before any", async () => {
  await publish(WALL_CHILD, {
    name: "wall-parent",
    nodes: [
      { id: "a", kind: "code", handler: "echo", input: "A" },
      { id: "sub", kind: "subworkflow", needs: ["a"], workflow: "wall-child" },
      { id: "after", kind: "code", needs: ["sub"], handler: "echo", input: "never" },
    ],
  });
  const parent = (await world.settled(await begin("wall-parent"))) as Ended;
  expect(parent.status).toBe("succeeded");
  expect(parent.partial_reason).toBe("limit_reached");
  expect(parent.result).toEqual({ a: "A" });
  expect(parent.nodes.sub!.error).toMatchObject({ partial_reason: "limit_reached" });
  expect(parent.nodes.after!.status).toBe("cancelled");

  const alone = await run({
    name: "wall-parent-alone",
    nodes: [
      { id: "sub", kind: "subworkflow", workflow: "wall-child", continue_on_error: true },
      { id: "after", kind: "code", needs: [{ node: "sub", when: "always" }], handler: "echo", input: "never" },
    ],
  });
  expect(alone.status).toBe("failed");
  expect(alone.error).toMatchObject({ code: "limit_reached", partial_reason: "limit_reached" });
  expect(alone.nodes.after!.status).toBe("cancelled");
});

it("C051 a child that succeeded partially leaves its parent succeeded with the same reason, in a sequence and in a parallel", async () => {
  await publish({
    name: "partial-child",
    limits: { max_steps: 1 },
    nodes: [
      { id: "x", kind: "code", handler: "echo", input: "X" },
      { id: "y", kind: "code", needs: ["x"], handler: "echo", input: "Y" },
    ],
  });
  const inSequence = await run({
    name: "partial-seq",
    nodes: [
      { id: "sub", kind: "subworkflow", workflow: "partial-child" },
      { id: "after", kind: "code", needs: ["sub"], handler: "echo", input: "after" },
    ],
  });
  expect(inSequence.status).toBe("succeeded");
  expect(inSequence.partial_reason).toBe("limit_reached");
  expect(inSequence.result).toEqual({ sub: { x: "X" }, after: "after" });

  const inParallel = await run({
    name: "partial-par",
    nodes: [
      {
        id: "par",
        kind: "parallel",
        branches: [[{ id: "sub", kind: "subworkflow", workflow: "partial-child" }], [{ id: "b", kind: "code", handler: "echo", input: "B" }]],
      },
    ],
  });
  expect(inParallel.status).toBe("succeeded");
  expect(inParallel.partial_reason).toBe("limit_reached");
});

for (const order of ["ceiling first", "stop first"] as const)
  it(`C052 a parallel holding a child's marked ceiling and a child's bare platform stop fails the run, declared ${order}`, async () => {
    await publish(WALL_CHILD, {
      name: "late-stop-child",
      nodes: [
        { id: "nap", kind: "sleep", duration_ms: 1_500 },
        { id: "bad", kind: "code", needs: ["nap"], handler: "echo", input: "${input.missing}" },
      ],
    });
    const branches = [[{ id: "ceiling", kind: "subworkflow", workflow: "wall-child" }], [{ id: "stop", kind: "subworkflow", workflow: "late-stop-child" }]];
    const r = await run({
      name: `c052-${order === "ceiling first" ? "a" : "b"}`,
      nodes: [
        { id: "a", kind: "code", handler: "echo", input: "A" },
        { id: "par", kind: "parallel", needs: ["a"], branches: order === "ceiling first" ? branches : [...branches].reverse() },
      ],
    });
    // The ceiling (at 300 ms) drains the run; the platform stop (after 1.5 s) still wins.
    expect(r.status).toBe("failed");
    expect(r.error).toMatchObject({ code: "reference_unreadable", nodes: ["stop"] });
    expect(r.partial_reason).toBeUndefined();
    expect(r.nodes.ceiling!.error).toMatchObject({ partial_reason: "limit_reached" });
  });

/** A map of `gated_call` items, each a set_value call; the test opens each item's gates. */
async function gatedMap(name: string, width: number, concurrency: number, calls: number) {
  const dir = mkdtempSync(join(tmpdir(), `${name}-`));
  const items = Array.from({ length: width }, (_, i) => ({
    server: "fx",
    tool: "set_value",
    args: { key: `${name}-${i}`, value: `v${i}` },
    go: join(dir, `go-${i}`),
    done: join(dir, `done-${i}`),
  }));
  await publish({
    name,
    limits: { max_tool_calls: calls },
    nodes: [{ id: "m", kind: "map", items: "${input.items}", handler: "gated_call", concurrency, max_fanout: 10 }],
  });
  const ceilings: Msg[] = [];
  const sub = world.nc.subscribe("rw.evt.t1.*.*.ceiling_reached", { callback: (_err, m) => void ceilings.push(m) });
  await world.nc.flush();
  const id = await begin(name, { items });
  const open = (gate: "go" | "done", i: number) => writeFileSync(items[i]![gate], "");
  const calls0 = fx.counts().calls.set_value ?? 0;
  return {
    id,
    open,
    calls: () => (fx.counts().calls.set_value ?? 0) - calls0,
    /** The run reported its ceiling (the refused call was never made). */
    ceilingSeen: () =>
      waitFor(() => ceilings.some((m) => m.json<{ run: string }>().run === id) || undefined, { timeoutMs: 10_000, describe: `${name}: ceiling_reached` }),
    done: async () => {
      sub.unsubscribe();
      return (await world.settled(id)) as Ended;
    },
    exists: (gate: "go" | "done", i: number) => existsSync(items[i]![gate]),
  };
}

it("C061 a map's call ceiling drains the batch: the item in flight finishes, the output keeps the prefix through the first stopping position, and the refused call is never made", async () => {
  const m = await gatedMap("c061-map", 4, 2, 2);
  m.open("go", 0);
  m.open("go", 1);
  m.open("go", 2);
  m.open("go", 3);
  await waitFor(() => m.calls() === 2 || undefined, { timeoutMs: 10_000, describe: "items 0 and 1 to call" });
  // Item 1 ends; item 2 starts, and its call is refused: the ceiling. Item 0 is still in flight.
  m.open("done", 1);
  await m.ceilingSeen();
  m.open("done", 0);
  const r = await m.done();
  expect(r.status).toBe("succeeded");
  expect(r.partial_reason).toBe("limit_reached");
  expect(r.result).toEqual({
    m: [
      { key: "c061-map-0", value: "v0" },
      { key: "c061-map-1", value: "v1" },
    ],
  });
  expect(m.calls()).toBe(2);
});

it("C062 a later item that finished before an earlier item's ceiling stop leaves no hole: its result is dropped", async () => {
  const m = await gatedMap("c062-map", 3, 3, 2);
  m.open("go", 0);
  m.open("go", 2);
  await waitFor(() => m.calls() === 2 || undefined, { timeoutMs: 10_000, describe: "items 0 and 2 to call" });
  m.open("done", 2);
  await waitFor(() => world.node.executor.inFlight === 2 || undefined, { timeoutMs: 10_000, describe: "item 2 to finish" });
  m.open("go", 1);
  await m.ceilingSeen();
  m.open("done", 0);
  const r = await m.done();
  expect(r.status).toBe("succeeded");
  expect(r.partial_reason).toBe("limit_reached");
  expect(r.result).toEqual({ m: [{ key: "c062-map-0", value: "v0" }] });
  expect(m.calls()).toBe(2);
});

it("C075 a run queued behind its tenant's cap for longer than its max_wall_ms still runs: its wall clock starts when it starts", async () => {
  const t2 = world.clientFor("t2");
  expect((await t2.putTenant({ max_concurrency: 1 })).outcome).toBe("updated");
  const release = join(mkdtempSync(join(tmpdir(), "c075-")), "release");
  for (const def of [
    { name: "holder", nodes: [{ id: "hold", kind: "code", handler: "wait_file", input: { path: release } }] },
    { name: "quick", limits: { max_wall_ms: 300 }, nodes: [{ id: "q", kind: "code", handler: "echo", input: "Q" }] },
  ])
    expect((await t2.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  const holder = ((await t2.startRun({ definition: "holder" })).run as RunAnswer).id;
  const quick = ((await t2.startRun({ definition: "quick" })).run as RunAnswer).id;
  const queued = (await t2.getRun(quick)).run as Ended;
  expect(queued.status).toBe("queued");
  await waitFor(() => Date.now() - queued.created_at > 3 * 300 || undefined, { timeoutMs: 5_000, describe: "the queued run to wait past its max_wall_ms" });
  expect(((await t2.getRun(quick)).run as Ended).status).toBe("queued");
  writeFileSync(release, "");
  expect((await world.settled(holder, t2)).status).toBe("succeeded");
  const r = (await world.settled(quick, t2)) as Ended;
  expect(r.status).toBe("succeeded");
  expect(r.partial_reason).toBeUndefined();
  expect(r.result).toEqual({ q: "Q" });
  expect(r.started_at! - r.created_at).toBeGreaterThan(300);
});
