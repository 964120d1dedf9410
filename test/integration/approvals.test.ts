import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { RUN_KIND } from "../../actors/index.js";
import { type RunContext } from "../../machines/index.js";
import { runShapeViolations } from "../../machines/run/index.js";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { startEffectsServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { readActor } from "../fixtures/read-actor.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/** The node's clock, moved forward by the test (a three-day wait without waiting three days). */
let offset = 0;
/** When set, the node's clock stands still at this instant. */
let frozen: number | undefined;
const world = workflowWorld({ name: "approvals-node", clock: { now: () => frozen ?? Date.now() + offset, monotonic: () => performance.now() } });
const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));
const DAY = 24 * 3_600_000;
let fx: EffectsServerHandle;
/** Files a test writes to release a step that waits for one (`wait_file`). */
const dir = mkdtempSync(join(tmpdir(), "rw-approvals-"));

type View = RunAnswer & { waiting: { on: string; ref: string; expires_at: number } | null };
const view = async (id: string) => (await world.client.getRun(id)).run as View;

beforeAll(async () => {
  fx = await startEffectsServer({ http: true });
  expect((await world.client.putToolServer({ name: "pay", transport: { type: "http", url: fx.url } })).outcome).toBe("saved");
  const def = {
    name: "refund",
    nodes: [
      {
        id: "gate",
        kind: "approval",
        prompt: "Refund this order?",
        payload: { account: "${input.account}", amount: "${input.amount}" },
        group: "finance",
        escalation_group: "cfo",
        timeout_ms: 7 * DAY,
      },
      { id: "pay", kind: "tool", needs: ["gate"], server: "pay", tool: "charge", arguments: "${steps.gate.output.payload}" },
    ],
  };
  expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
}, 30_000);
afterAll(async () => {
  await fx?.stop();
});

async function waitingRun(input: Record<string, unknown>): Promise<{ id: string; approval: string }> {
  const id = ((await world.client.startRun({ definition: "refund", input })).run as RunAnswer).id;
  const run = await waitFor(
    async () => {
      const r = (await world.client.getRun(id)).run as RunAnswer & { waiting: { on: string; ref: string } | null };
      return r.status === "waiting" ? r : undefined;
    },
    { timeoutMs: 10_000, describe: "the run to wait for its approval" },
  );
  expect(run.waiting).toMatchObject({ on: "approval", ref: `${id}:gate` });
  return { id, approval: `${id}:gate` };
}

it("C119 an approval waits three days holding no worker, untouched by every sweep pass, is listed for its group (and its escalation group), and the approved call executes once with the approved arguments", async () => {
  const before = fx.counts().effects.charge ?? 0;
  const { id, approval } = await waitingRun({ account: "acme", amount: 30 });
  expect(world.node.executor.inFlight).toBe(0);
  const revision = (await readActor(world.nc, RUN_KIND, id))!.revision;
  for (const later of [3_600_000, DAY, 3 * DAY, 6 * DAY]) {
    const report = await world.node.sweeper.pass(Date.now() + later);
    expect(report.actions.wait_abandoned ?? 0).toBe(0);
    expect((await view(id)).status).toBe("waiting");
    expect((await readActor(world.nc, RUN_KIND, id))!.revision).toBe(revision);
  }
  const listed = (await world.client.approvals({ group: "finance" })).approvals as { id: string; prompt: string; payload: unknown }[];
  expect(listed.find((a) => a.id === approval)).toMatchObject({ prompt: "Refund this order?", payload: { account: "acme", amount: 30 } });
  expect(((await world.client.approvals({ group: "cfo" })).approvals as { id: string }[]).map((a) => a.id)).toContain(approval);
  expect(((await world.client.approvals({ group: "legal" })).approvals as { id: string }[]).map((a) => a.id)).not.toContain(approval);
  offset = 3 * DAY;
  try {
    expect(await world.client.decide(approval, "approve", { by: "alice" })).toEqual({ outcome: "decided", approval, decision: "approved" });
  } finally {
    offset = 0;
  }
  const done = await world.settled(id);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ gate: { decision: "approved", by: "alice" }, pay: { account: "acme", amount: 30 } });
  expect(fx.counts().effects.charge).toBe(before + 1);
  expect(await world.client.decide(approval, "approve", { by: "bob" })).toEqual({ outcome: "already_decided" });
  expect(((await world.client.approvals()).approvals as { id: string }[]).map((a) => a.id)).not.toContain(approval);
});

it("an edit's changed arguments are what the tool receives; a rejection fails the node and nothing is called", async () => {
  const { id, approval } = await waitingRun({ account: "acme", amount: 500 });
  expect(await world.client.decide(approval, "edit", { payload: { account: "acme", amount: 50 }, by: "alice" })).toMatchObject({
    outcome: "decided",
    decision: "edited",
  });
  const edited = await world.settled(id);
  expect(edited.result).toMatchObject({ pay: { account: "acme", amount: 50 } });

  const calls = fx.counts().calls.charge ?? 0;
  const rejected = await waitingRun({ account: "evil", amount: 1_000_000 });
  expect(await world.client.decide(rejected.approval, "reject", { reason: "no", by: "alice" })).toMatchObject({ outcome: "decided", decision: "rejected" });
  const run = await world.settled(rejected.id);
  expect(run.status).toBe("failed");
  expect(run.nodes.gate!.error?.code).toBe("approval_rejected");
  expect(fx.counts().calls.charge ?? 0).toBe(calls);
});

it("past its deadline an approval is expired by its run's clock; a decision then answers approval_expired; bad input gets closed answers", async () => {
  const { approval } = await waitingRun({ account: "late", amount: 1 });
  offset = 8 * DAY;
  try {
    expect(await world.client.decide(approval, "approve", { by: "alice" })).toEqual({ outcome: "approval_expired" });
  } finally {
    offset = 0;
  }
  expect(await world.client.decide("t1_nope:gate", "approve")).toEqual({ outcome: "approval_not_found" });
  expect(await world.client.decide("no-colon", "approve")).toEqual({ outcome: "approval_not_found" });
  expect((await world.client.decide(approval, "edit")).outcome).toBe("invalid_input");
  expect((await world.client.approval("t1_nope:gate")).outcome).toBe("approval_not_found");
});

it("C036 C095 an expired action approval ends the run under the one status rule: after work a success with partial_reason approval_expired, the gated call never made; before any work a failure approval_expired", async () => {
  const calls = fx.counts().calls.charge ?? 0;
  const late = {
    name: "late-refund",
    nodes: [
      { id: "prep", kind: "code", handler: "echo", input: { account: "${input.account}", amount: 7 } },
      { id: "gate", kind: "approval", prompt: "Refund?", needs: ["prep"], payload: "${steps.prep.output}", group: "finance", timeout_ms: 300 },
      { id: "pay", kind: "tool", needs: ["gate"], server: "pay", tool: "charge", arguments: "${steps.gate.output.payload}" },
    ],
  };
  expect((await world.client.putDefinition(late)).outcome).toMatch(/published|unchanged/);
  const id = ((await world.client.startRun({ definition: "late-refund", input: { account: "slow" } })).run as RunAnswer).id;
  const run = (await world.settled(id)) as RunAnswer & { partial_reason?: string };
  expect(run.status).toBe("succeeded");
  expect(run.partial_reason).toBe("approval_expired");
  expect(run.error).toBeNull();
  expect(run.nodes.prep!.status).toBe("succeeded");
  expect(run.nodes.gate!.error?.code).toBe("approval_expired");
  expect(run.nodes.pay!.status).toBe("cancelled");
  expect(fx.counts().calls.charge ?? 0).toBe(calls);
  expect(await world.client.decide(`${id}:gate`, "approve", { by: "alice" })).toEqual({ outcome: "approval_expired" });
  expect(((await world.client.approvals({ run_id: id })).approvals as unknown[]).length).toBe(0);

  const short = {
    name: "short-gate",
    nodes: [
      { id: "g", kind: "approval", prompt: "quick?", timeout_ms: 300 },
      { id: "pay", kind: "tool", needs: ["g"], server: "pay", tool: "charge", arguments: { account: "x", amount: 1 } },
    ],
  };
  expect((await world.client.putDefinition(short)).outcome).toMatch(/published|unchanged/);
  const expired = (await world.settled(((await world.client.startRun({ definition: "short-gate" })).run as RunAnswer).id)) as RunAnswer & {
    partial_reason?: string;
  };
  expect(expired.status).toBe("failed");
  expect(expired.error?.code).toBe("approval_expired");
  expect(expired.partial_reason).toBeUndefined();
  expect(expired.nodes.g!.error?.code).toBe("approval_expired");
  expect(fx.counts().calls.charge ?? 0).toBe(calls);
});

it("runway approvals ls / show / approve from the command line", async () => {
  const { id, approval } = await waitingRun({ account: "cli", amount: 2 });
  const runway = async (args: string[]) => {
    const child = spawnTsx(cli, [...args, "--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--tenant", "t1"], {
      name: "runway approvals",
    });
    const exit = await child.exited;
    return { code: exit.code, out: child.lines.join("\n") };
  };
  expect((await runway(["approvals", "ls", "--group", "finance"])).out).toContain(approval);
  expect((await runway(["approvals", "show", approval])).out).toContain("Refund this order?");
  const approved = await runway(["approvals", "approve", approval, "--by", "carol"]);
  expect(approved.code, approved.out).toBe(0);
  expect((await world.settled(id)).status).toBe("succeeded");
  const again = await runway(["approvals", "approve", approval]);
  expect(again.code).toBe(1);
  expect(again.out).toContain("already_decided");
});

it("C096 an approval decided in the same instant as its timeout has exactly one outcome: the decision (its timer then finds nothing to expire), and the approved call executes once", async () => {
  const charges = fx.counts().effects.charge ?? 0;
  const { id, approval } = await waitingRun({ account: "edge", amount: 3 });
  const item = (await world.client.approval(approval)).approval as { expires_at: number };
  frozen = item.expires_at;
  try {
    expect(await world.client.decide(approval, "approve", { by: "alice" })).toMatchObject({ outcome: "decided", decision: "approved" });
    // The expiry timer, late or not, meets a decided approval: no second outcome.
    await world.node.node.host.dispatch({ kind: "run", id }, { type: "timer.fired", kind: "approval", node: "gate" }, `late-timer/${id}`);
  } finally {
    frozen = undefined;
  }
  const run = await world.settled(id);
  expect(run.status).toBe("succeeded");
  const events = ((await world.client.runEvents(id)).events as { type: string }[]).map((e) => e.type);
  expect(events.filter((t) => t === "approval_decided")).toHaveLength(1);
  expect(events).not.toContain("approval_expired");
  expect(fx.counts().effects.charge).toBe(charges + 1);
});

it("C107 C104 two approvals in one parallel node resolve in either order; the run waits while either is pending, naming the oldest (plan order breaks a tie), then the other", async () => {
  const def = {
    name: "two-gates",
    nodes: [
      {
        id: "both",
        kind: "parallel",
        branches: [
          [{ id: "legal", kind: "approval", prompt: "legal?", group: "legal" }],
          [{ id: "finance", kind: "approval", prompt: "finance?", group: "finance" }],
        ],
      },
    ],
  };
  expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  for (const order of [
    ["legal", "finance"],
    ["finance", "legal"],
  ]) {
    const id = ((await world.client.startRun({ definition: "two-gates" })).run as RunAnswer).id;
    await waitFor(async () => ((await world.client.approvals({ run_id: id })).approvals as unknown[]).length === 2 || undefined, {
      timeoutMs: 10_000,
      describe: "both approvals to be listed",
    });
    // Both were asked in the same instant: the first in plan order counts as the oldest.
    expect((await view(id)).waiting).toMatchObject({ on: "approval", ref: `${id}:legal` });
    expect(await world.client.decide(`${id}:${order[0]}`, "approve", { by: "alice" })).toMatchObject({ outcome: "decided" });
    const between = await view(id);
    expect(between.status).toBe("waiting");
    expect(between.waiting).toMatchObject({ on: "approval", ref: `${id}:${order[1]}` });
    expect(await world.client.decide(`${id}:${order[1]}`, "approve", { by: "bob" })).toMatchObject({ outcome: "decided" });
    const run = await world.settled(id);
    expect(run.status, order.join(" then ")).toBe("succeeded");
    expect(run.result).toMatchObject({ legal: { decision: "approved" }, finance: { decision: "approved" } });
  }
});

it("C103 C055 a branch parked on an approval does not stop its sibling: the sibling's two steps are leased and complete while the run waits on the approval", async () => {
  const release = join(dir, "c103");
  const def = {
    name: "gate-beside-work",
    nodes: [
      {
        id: "par",
        kind: "parallel",
        branches: [
          [{ id: "gate", kind: "approval", prompt: "ship?", group: "ops" }],
          [
            { id: "b1", kind: "code", handler: "wait_file", input: { path: release, value: 1 } },
            { id: "b2", kind: "code", handler: "echo", needs: ["b1"], input: "${steps.b1.output}" },
          ],
        ],
      },
    ],
  };
  expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  const id = ((await world.client.startRun({ definition: "gate-beside-work" })).run as RunAnswer).id;
  // The sibling's first step runs on a worker while the run waits on the approval.
  await waitFor(() => world.node.executor.inFlight === 1 || undefined, {
    timeoutMs: 10_000,
    describe: "b1 to be running",
  });
  const parked = await view(id);
  expect(parked.status).toBe("waiting");
  expect(parked.waiting).toMatchObject({ on: "approval", ref: `${id}:gate` });
  writeFileSync(release, "");
  const done = await waitFor(async () => ((await view(id)).nodes.b2?.status === "succeeded" ? view(id) : undefined), {
    timeoutMs: 10_000,
    describe: "the sibling branch to complete",
  });
  expect(done.status).toBe("waiting");
  expect(done.nodes.gate!.status).toBe("active");
  expect(done.waiting).toMatchObject({ on: "approval", ref: `${id}:gate` });
  expect(await world.client.decide(`${id}:gate`, "approve", { by: "alice" })).toMatchObject({ outcome: "decided" });
  const run = await world.settled(id);
  expect(run.status).toBe("succeeded");
  expect(run.result).toMatchObject({ gate: { decision: "approved" }, b2: 1 });
});

it("C108 after its approval the run reads running, its waiting fields cleared, while the next step executes", async () => {
  const release = join(dir, "c108");
  const def = {
    name: "gate-then-work",
    nodes: [
      { id: "gate", kind: "approval", prompt: "go?" },
      { id: "work", kind: "code", handler: "wait_file", needs: ["gate"], input: { path: release, value: "done" } },
    ],
  };
  expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  const id = ((await world.client.startRun({ definition: "gate-then-work" })).run as RunAnswer).id;
  await waitFor(async () => (await view(id)).status === "waiting" || undefined, { timeoutMs: 10_000, describe: "the run to wait" });
  expect(await world.client.decide(`${id}:gate`, "approve", { by: "alice" })).toMatchObject({ outcome: "decided" });
  await waitFor(() => world.node.executor.inFlight === 1 || undefined, {
    timeoutMs: 10_000,
    describe: "the next step to execute",
  });
  const running = await view(id);
  expect([running.status, running.waiting]).toEqual(["running", null]);
  const lc = (await readActor(world.nc, RUN_KIND, id))!.context as unknown as { run: { lifecycle: Record<string, unknown> } };
  expect(lc.run.lifecycle).toMatchObject({ status: "running", waiting_on: null, waiting_ref: null, waiting_expires_at: null });
  writeFileSync(release, "");
  expect((await world.settled(id)).status).toBe("succeeded");
});

it("C013 cancelling a run parked on an approval or a signal: cancelled, its three waiting fields cleared (the record's shape holds), its approval gone from the inbox", async () => {
  const defs = [
    { name: "cancel-gate", nodes: [{ id: "gate", kind: "approval", prompt: "go?", group: "ops" }] },
    { name: "cancel-wait", nodes: [{ id: "gate", kind: "wait", signal: "go" }] },
  ];
  for (const def of defs) {
    expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
    const id = ((await world.client.startRun({ definition: def.name })).run as RunAnswer).id;
    await waitFor(async () => (await view(id)).status === "waiting" || undefined, { timeoutMs: 10_000, describe: "the run to wait" });
    const approval = def.name === "cancel-gate";
    if (approval)
      await waitFor(async () => ((await world.client.approvals({ run_id: id })).approvals as unknown[]).length === 1 || undefined, {
        timeoutMs: 10_000,
        describe: "the approval to be listed",
      });
    expect((await world.client.cancelRun(id)).outcome).toBe("cancelled");
    const run = await view(id);
    expect([run.status, run.waiting]).toEqual(["cancelled", null]);
    const stored = (await readActor(world.nc, RUN_KIND, id))!.context as unknown as { run: RunContext };
    expect(stored.run.lifecycle).toMatchObject({ status: "cancelled", waiting_on: null, waiting_ref: null, waiting_expires_at: null });
    expect(runShapeViolations({ ...stored.run.lifecycle, id, root_run_id: stored.run.root_run_id, parent_run_id: stored.run.parent_run_id })).toEqual([]);
    if (approval) {
      await waitFor(async () => ((await world.client.approvals({ run_id: id })).approvals as unknown[]).length === 0 || undefined, {
        timeoutMs: 10_000,
        describe: "the approval to leave the inbox",
      });
      expect(await world.client.decide(`${id}:gate`, "approve", { by: "alice" })).toEqual({ outcome: "run_not_waiting" });
    } else expect((await world.client.signal(id, "go", {})).outcome).toBe("run_not_waiting");
  }
});

it("the inbox is listed a page at a time, soonest deadline first: every pending approval exactly once across the pages; a bad limit or cursor is invalid_input", async () => {
  const client = world.clientFor("pages");
  expect((await world.client.createTenant("pages")).outcome).toBe("created");
  const gate = (i: number) => ({ id: "gate", kind: "approval", prompt: `#${i}`, group: "paging", timeout_ms: (10 - (i % 4)) * DAY });
  for (let i = 0; i < 7; i++) expect((await client.putDefinition({ name: `gate${i}`, nodes: [gate(i)] })).outcome).toBe("published");
  for (let i = 0; i < 7; i++) expect((await client.startRun({ definition: `gate${i}` })).outcome).toBe("started");
  const everything = await waitFor(
    async () => {
      const all = (await client.approvals({ group: "paging", limit: 500 })) as unknown as { approvals: { id: string; expires_at: number }[] };
      return all.approvals.length === 7 ? all.approvals : undefined;
    },
    { timeoutMs: 10_000, describe: "seven pending approvals" },
  );
  const seen: { id: string; expires_at: number }[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = (await client.approvals({ group: "paging", limit: 3, ...(cursor ? { cursor } : {}) })) as unknown as {
      outcome: string;
      approvals: { id: string; expires_at: number }[];
      next_cursor: string | null;
    };
    expect(page.outcome).toBe("ok");
    expect(page.approvals.length).toBeLessThanOrEqual(3);
    seen.push(...page.approvals);
    cursor = page.next_cursor ?? undefined;
    pages++;
  } while (cursor && pages < 10);
  expect(pages).toBe(3);
  expect(seen.map((a) => a.id)).toEqual(everything.map((a) => a.id));
  expect(new Set(seen.map((a) => a.id)).size).toBe(7);
  expect(seen.map((a) => a.expires_at)).toEqual([...seen.map((a) => a.expires_at)].sort((a, b) => a - b));
  expect((await client.approvals({ limit: 501 })).outcome).toBe("invalid_input");
  expect((await client.approvals({ cursor: "not-a-cursor" })).outcome).toBe("invalid_input");
});
