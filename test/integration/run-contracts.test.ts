import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Kvm } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { childStartKey, runIdFor, RUN_KIND } from "../../actors/index.js";
import { partitionBucket, partitionOf } from "../../runtime/index.js";
import { waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * Seed 004 contract rows on a real node: platform stops, trees and their shape, cancellation
 * reaching the subtree and the running handler, lanes from identity, start keys, the map output
 * bound, the audit of refused starts. Each test is named after the rows it proves.
 */
const world = workflowWorld({ name: "contracts-node", scheduler: { slots: 4, interactive_reserve: 0 }, stepLeaseTtlMs: 60_000 });

type View = RunAnswer & {
  lane: string;
  root_run_id: string;
  parent_run_id: string | null;
  definition: { name: string; version: number; digest: string };
  cancel: unknown;
};
const HOUR = 3_600_000;
const dir = mkdtempSync(join(tmpdir(), "rw-contracts-"));
const ledger = (name: string) => join(dir, `${name}.log`);
const lines = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").filter(Boolean) : []);

async function tenant(id: string, settings?: Record<string, unknown>) {
  const client = world.clientFor(id);
  expect((await client.createTenant(id, settings)).outcome).toMatch(/created|exists/);
  return client;
}

async function publish(client: ReturnType<typeof world.clientFor>, definition: object) {
  const put = await client.putDefinition(definition);
  expect(["published", "unchanged"], JSON.stringify(put)).toContain(put.outcome);
}

const view = async (client: ReturnType<typeof world.clientFor>, id: string) => (await client.getRun(id)).run as View;
const until = (client: ReturnType<typeof world.clientFor>, id: string, status: string) =>
  waitFor(async () => ((await client.getRun(id)).run as View | undefined)?.status === status || undefined, {
    timeoutMs: 20_000,
    describe: `run ${id} to be ${status}`,
  });

/** The stored revision of a run's record (unchanged ⇔ nothing was written to it). */
async function revision(id: string): Promise<number | undefined> {
  const kv = await new Kvm(world.nc).open(partitionBucket(partitionOf(id, 32)));
  return (await kv.get(`${RUN_KIND}.${id}`))?.revision;
}

describe("platform stops", () => {
  it("C043 a continue_on_error node that fails reference_unreadable stops the run at once; the node that needs it `always` never starts", async () => {
    const client = await tenant("ps1");
    const file = ledger("c043");
    await publish(client, {
      name: "stop",
      nodes: [
        { id: "bad", kind: "code", handler: "noop", input: "${input.missing.deep}", continue_on_error: true },
        { id: "after", kind: "code", handler: "count_invocations", needs: [{ node: "bad", when: "always" }], input: { file, value: 1 } },
      ],
    });
    const done = await settled(client, ((await client.startRun({ definition: "stop" })).run as View).id);
    expect(done.status).toBe("failed");
    expect(done.error).toMatchObject({ code: "reference_unreadable" });
    expect(done.nodes.after!.status).toBe("cancelled");
    expect(existsSync(file)).toBe(false);
  });

  it("C053 a child run that ended under a platform stop fails its parent node with that code, and the parent's continue_on_error does not tolerate it", async () => {
    const client = await tenant("ps2");
    const file = ledger("c053");
    await publish(client, { name: "leaf", nodes: [{ id: "bad", kind: "code", handler: "noop", input: "${input.nothing}" }] });
    await publish(client, {
      name: "top",
      nodes: [
        { id: "sub", kind: "subworkflow", workflow: "leaf", continue_on_error: true },
        { id: "after", kind: "code", handler: "count_invocations", needs: [{ node: "sub", when: "always" }], input: { file, value: 1 } },
      ],
    });
    const top = ((await client.startRun({ definition: "top" })).run as View).id;
    const done = await settled(client, top);
    expect(done.status).toBe("failed");
    expect(done.error).toMatchObject({ code: "reference_unreadable" });
    expect(done.nodes.sub!.error).toMatchObject({ code: "reference_unreadable" });
    expect((await view(client, runIdFor("ps2", childStartKey(top, "sub")))).error).toMatchObject({ code: "reference_unreadable" });
    expect(existsSync(file)).toBe(false);
  });
});

describe("trees", () => {
  it("C009 a child three levels deep takes its root's id and tenant (not its parent's id as root); C041 each child runs once, through its parent", async () => {
    const client = await tenant("tr1");
    const file = ledger("c009");
    await publish(client, { name: "leaf", nodes: [{ id: "x", kind: "code", handler: "count_invocations", input: { file, value: "leaf" } }] });
    await publish(client, { name: "mid", nodes: [{ id: "sub", kind: "subworkflow", workflow: "leaf" }] });
    await publish(client, { name: "root", nodes: [{ id: "sub", kind: "subworkflow", workflow: "mid" }] });
    const root = ((await client.startRun({ definition: "root" })).run as View).id;
    expect((await settled(client, root)).status).toBe("succeeded");
    const mid = await view(client, runIdFor("tr1", childStartKey(root, "sub")));
    const leaf = await view(client, runIdFor("tr1", childStartKey(mid.id, "sub")));
    expect([mid.root_run_id, mid.parent_run_id]).toEqual([root, root]);
    expect([leaf.root_run_id, leaf.parent_run_id]).toEqual([root, mid.id]);
    expect(leaf.id.startsWith("tr1_")).toBe(true);
    expect(lines(file)).toHaveLength(1);
  });

  it("C028 a child create whose root or tenant disagrees with its parent's is refused invalid_input and no run exists", async () => {
    const client = await tenant("tr2");
    await publish(client, { name: "leaf", nodes: [{ id: "nap", kind: "sleep", duration_ms: HOUR }] });
    await publish(client, { name: "root", nodes: [{ id: "sub", kind: "subworkflow", workflow: "leaf" }] });
    const root = ((await client.startRun({ definition: "root" })).run as View).id;
    const child = runIdFor("tr2", childStartKey(root, "sub"));
    await until(client, child, "waiting");
    const def = (await view(client, child)).definition;
    const bad = runIdFor("tr2", "bad-shape");
    for (const shape of [{ root_run_id: bad }, { root_run_id: child }, { tenant: "tr1" }, { depth: 3 }]) {
      const answer = await world.node.node.mailbox.request(
        { kind: RUN_KIND, id: bad },
        {
          type: "run.create",
          run: {
            id: bad,
            tenant: "tr2",
            root_run_id: root,
            parent_run_id: root,
            parent_node: "sub",
            depth: 1,
            definition: def,
            source: "workflow_step",
            start_key: `${root}:x`,
            lane: "batch",
            input: {},
            ...shape,
          },
        },
        `create/${bad}/${JSON.stringify(shape)}`,
        10_000,
      );
      expect(answer, JSON.stringify(shape)).toMatchObject({ outcome: "applied", value: { outcome: "invalid_input" } });
    }
    expect(await revision(bad)).toBeUndefined();
    expect((await client.cancelRun(root)).outcome).toBe("cancelled");
  });

  it("C003 a draft is not published: a top-level start answers definition_not_published, and a parent naming a draft-only child is refused at publish", async () => {
    const client = await tenant("tr3");
    expect((await client.putDefinition({ name: "draft", nodes: [{ id: "a", kind: "code", handler: "noop" }] }, false)).outcome).toBe("draft_saved");
    expect((await client.startRun({ definition: "draft" })).outcome).toBe("definition_not_published");
    // With a parent: children are pinned when the parent is published, so a draft-only child is refused then, before any run could start it.
    const parent = await client.putDefinition({ name: "parent", nodes: [{ id: "sub", kind: "subworkflow", workflow: "draft" }] });
    expect(parent.outcome).toBe("invalid_definition");
    expect(JSON.stringify(parent)).toMatch(/draft/);
    expect((await client.startRun({ definition: "parent" })).outcome).toBe("definition_not_found");
  });
});

describe("cancellation", () => {
  it("C023 cancelling a mid-tree run ends it and everything below it; its parent is not cancelled and its sibling's record is untouched", async () => {
    const client = await tenant("cx1");
    await publish(client, { name: "leaf", nodes: [{ id: "nap", kind: "sleep", duration_ms: HOUR }] });
    await publish(client, { name: "mid", nodes: [{ id: "sub", kind: "subworkflow", workflow: "leaf" }] });
    await publish(client, {
      name: "root",
      nodes: [
        {
          id: "par",
          kind: "parallel",
          branches: [[{ id: "a", kind: "subworkflow", workflow: "mid", continue_on_error: true }], [{ id: "b", kind: "subworkflow", workflow: "leaf" }]],
        },
      ],
    });
    const root = ((await client.startRun({ definition: "root" })).run as View).id;
    const midA = runIdFor("cx1", childStartKey(root, "a"));
    const leafA = runIdFor("cx1", childStartKey(midA, "sub"));
    const sibling = runIdFor("cx1", childStartKey(root, "b"));
    await until(client, leafA, "waiting");
    await until(client, sibling, "waiting");
    const siblingRev = await revision(sibling);
    expect((await client.cancelRun(midA)).outcome).toBe("cancelled");
    await until(client, leafA, "cancelled");
    expect((await view(client, midA)).status).toBe("cancelled");
    await waitFor(async () => (await view(client, root)).nodes.a?.status === "failed" || undefined, {
      timeoutMs: 10_000,
      describe: "the root's node a to settle",
    });
    expect((await view(client, root)).nodes.a!.error).toMatchObject({ code: "child_cancelled" });
    expect((await view(client, root)).status).toBe("running");
    expect(await revision(sibling)).toBe(siblingRev);
    expect((await client.cancelRun(root)).outcome).toBe("cancelled");
  });

  it("C024 cancelling a finished run (succeeded or failed) answers not_cancellable and writes nothing: no cancel record, no epoch raised", async () => {
    const client = await tenant("cx8");
    await publish(client, { name: "ok", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
    await publish(client, { name: "bad", nodes: [{ id: "a", kind: "code", handler: "fail_terminal" }] });
    for (const [definition, status] of [
      ["ok", "succeeded"],
      ["bad", "failed"],
    ] as const) {
      const id = ((await client.startRun({ definition })).run as View).id;
      expect((await settled(client, id)).status).toBe(status);
      const before = await revision(id);
      const answer = await client.cancelRun(id);
      expect(answer.outcome).toBe("not_cancellable");
      expect((answer.run as View).status).toBe(status);
      expect(await revision(id)).toBe(before);
      expect((await view(client, id)).cancel).toBeNull();
    }
  });

  it("C025 cancelling another tenant's run id answers run_not_found and changes nothing", async () => {
    const owner = await tenant("cx2");
    const other = await tenant("cx3");
    await publish(owner, { name: "nap", nodes: [{ id: "nap", kind: "sleep", duration_ms: HOUR }] });
    const run = ((await owner.startRun({ definition: "nap" })).run as View).id;
    await until(owner, run, "waiting");
    const before = await revision(run);
    expect((await other.cancelRun(run)).outcome).toBe("run_not_found");
    expect((await other.getRun(run)).outcome).toBe("run_not_found");
    expect(await revision(run)).toBe(before);
    expect((await owner.cancelRun(run)).outcome).toBe("cancelled");
  });

  it("C027 cancelling a tree leaves its already-succeeded child untouched (no write, no cancel record); only the live child is cancelled", async () => {
    const client = await tenant("cx4");
    await publish(client, { name: "quick", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
    await publish(client, { name: "nap", nodes: [{ id: "nap", kind: "sleep", duration_ms: HOUR }] });
    await publish(client, {
      name: "root",
      nodes: [
        { id: "first", kind: "subworkflow", workflow: "quick" },
        { id: "second", kind: "subworkflow", workflow: "nap", needs: ["first"] },
      ],
    });
    const root = ((await client.startRun({ definition: "root" })).run as View).id;
    const first = runIdFor("cx4", childStartKey(root, "first"));
    const second = runIdFor("cx4", childStartKey(root, "second"));
    await until(client, second, "waiting");
    const firstRev = await revision(first);
    expect((await client.cancelRun(root)).outcome).toBe("cancelled");
    await until(client, second, "cancelled");
    expect(await revision(first)).toBe(firstRev);
    const done = await view(client, first);
    expect([done.status, done.cancel]).toEqual(["succeeded", null]);
    expect((await view(client, second)).cancel).toMatchObject({ by: root });
  });

  it("C026 C031 C100 a child created after its parent was cancelled is refused parent_cancelled before it exists; a deep tree cancelled from the root leaves no descendant live", async () => {
    const client = await tenant("cx5");
    await publish(client, { name: "leaf", nodes: [{ id: "nap", kind: "sleep", duration_ms: HOUR }] });
    await publish(client, { name: "mid", nodes: [{ id: "sub", kind: "subworkflow", workflow: "leaf" }] });
    await publish(client, {
      name: "root",
      nodes: [
        { id: "par", kind: "parallel", branches: [[{ id: "a", kind: "subworkflow", workflow: "mid" }], [{ id: "b", kind: "subworkflow", workflow: "mid" }]] },
      ],
    });
    const root = ((await client.startRun({ definition: "root" })).run as View).id;
    const mids = ["a", "b"].map((n) => runIdFor("cx5", childStartKey(root, n)));
    const leaves = mids.map((m) => runIdFor("cx5", childStartKey(m, "sub")));
    for (const leaf of leaves) await until(client, leaf, "waiting");
    expect((await client.cancelRun(root)).outcome).toBe("cancelled");
    for (const id of [...mids, ...leaves]) await until(client, id, "cancelled");
    // A create that the cancelled mid's outbox would have made, arriving now: refused, nothing stored.
    const late = runIdFor("cx5", childStartKey(mids[0]!, "late"));
    const def = (await view(client, leaves[0]!)).definition;
    const answer = await world.node.node.mailbox.request(
      { kind: RUN_KIND, id: late },
      {
        type: "run.create",
        run: {
          id: late,
          tenant: "cx5",
          root_run_id: root,
          parent_run_id: mids[0],
          parent_node: "sub",
          depth: 2,
          definition: def,
          source: "workflow_step",
          start_key: `${mids[0]}:late`,
          lane: "batch",
          input: {},
        },
      },
      `create/${late}`,
      10_000,
    );
    expect(answer).toMatchObject({ outcome: "applied", value: { outcome: "parent_cancelled" } });
    expect(await revision(late)).toBeUndefined();
  });

  it("C072 a run cancelled between two nodes never starts the second; the running handler's signal is aborted and its worker slot freed at once", async () => {
    const client = await tenant("cx6");
    const file = ledger("c072");
    await publish(client, {
      name: "two",
      nodes: [
        { id: "long", kind: "code", handler: "slow", input: { ms: 30_000 }, timeout_ms: 60_000 },
        { id: "next", kind: "code", handler: "count_invocations", needs: ["long"], input: { file, value: 1 } },
      ],
    });
    await publish(client, { name: "quick", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
    const aborted = world.node.pool.stats().aborted;
    // Fill every worker slot with a 30 s handler.
    const runs: string[] = [];
    for (let i = 0; i < 4; i++) runs.push(((await client.startRun({ definition: "two" })).run as View).id);
    await waitFor(() => world.node.executor.inFlight === 4 || undefined, { timeoutMs: 10_000, describe: "four handlers running" });
    for (const id of runs) expect((await client.cancelRun(id)).outcome).toBe("cancelled");
    // The handlers stop now, not in 30 s: their slots are free for the next run.
    await waitFor(() => world.node.executor.inFlight === 0 || undefined, { timeoutMs: 10_000, describe: "the cancelled handlers to stop" });
    expect(world.node.pool.stats().aborted - aborted).toBe(4);
    const next = ((await client.startRun({ definition: "quick" })).run as View).id;
    expect((await settled(client, next)).status).toBe("succeeded");
    for (const id of runs) expect((await view(client, id)).nodes.next!.status).toBe("cancelled");
    expect(existsSync(file)).toBe(false);
  });

  it("C112 a run cancelled while queued ignores a later run.admitted: nothing is leased", async () => {
    const client = await tenant("cx7", { max_concurrency: 1 });
    const file = ledger("c112");
    await publish(client, { name: "nap", nodes: [{ id: "nap", kind: "sleep", duration_ms: HOUR }] });
    await publish(client, { name: "work", nodes: [{ id: "a", kind: "code", handler: "count_invocations", input: { file, value: 1 } }] });
    const holder = ((await client.startRun({ definition: "nap" })).run as View).id;
    await until(client, holder, "waiting");
    const queued = (await client.startRun({ definition: "work" })).run as View;
    expect(queued.status).toBe("queued");
    expect((await client.cancelRun(queued.id)).outcome).toBe("cancelled");
    const rev = await revision(queued.id);
    const admitted = await world.node.node.mailbox.request({ kind: RUN_KIND, id: queued.id }, { type: "run.admitted" }, `admitted/${queued.id}`, 10_000);
    expect(admitted.outcome).toBe("refused");
    // The holder ends: the tenant's slot frees, and the cancelled run is not among those told.
    expect((await client.cancelRun(holder)).outcome).toBe("cancelled");
    await waitFor(async () => ((await client.getTenant()).tenant as { active_runs: number }).active_runs === 0 || undefined, {
      timeoutMs: 10_000,
      describe: "the slot to free",
    });
    expect(await revision(queued.id)).toBe(rev);
    expect((await view(client, queued.id)).status).toBe("cancelled");
    expect(existsSync(file)).toBe(false);
  });
});

describe("maps", () => {
  it("C060 one failing map item does not stop its siblings, whatever continue_on_error says", async () => {
    const client = await tenant("mp1");
    for (const coe of [false, true]) {
      const file = ledger(`c060-${coe}`);
      const name = `wide-${coe}`;
      await publish(client, {
        name,
        nodes: [
          {
            id: "m",
            kind: "map",
            items: "${input.items}",
            handler: "ledger_fail",
            max_fanout: 10,
            concurrency: 1,
            continue_on_error: coe,
            input: { file, fail: "${item}" },
          },
        ],
      });
      const run = ((await client.startRun({ definition: name, input: { items: [false, true, false, false] } })).run as View).id;
      const done = await settled(client, run);
      expect(done.nodes.m).toMatchObject({ status: "failed", error: { code: "map_item_failed" } });
      expect(done.status).toBe(coe ? "succeeded" : "failed");
      // Items run one at a time in order: the ones after the failure still ran, once each.
      expect(lines(file).map((l) => l.split(" ")[1])).toEqual(["m[0]", "m[1]", "m[2]", "m[3]"]);
    }
  });

  it("C068 a map whose items' combined output would pass 16 MiB fails fanout_output_too_large; no record holds the outputs", async () => {
    const client = await tenant("mp2");
    await publish(client, {
      name: "fat",
      nodes: [{ id: "m", kind: "map", items: "${input.items}", handler: "big", max_fanout: 1_000, concurrency: 16, input: { bytes: 32_000 } }],
    });
    const run = ((await client.startRun({ definition: "fat", input: { items: Array.from({ length: 560 }, (_, i) => i) } })).run as View).id;
    const done = await settled(client, run);
    expect(done.status).toBe("failed");
    expect(done.nodes.m!.error).toMatchObject({ code: "fanout_output_too_large" });
    // Each item's output is stored once, in its own journal entry; the run's head holds none of them.
    const kv = await new Kvm(world.nc).open(partitionBucket(partitionOf(run, 32)));
    expect((await kv.get(`${RUN_KIND}.${run}`))!.length).toBeLessThan(64 * 1024);
  });
});

describe("bad output", () => {
  it("a handler output nested too deep for any record fails bad_output at once (no retry), and the run ends; the node keeps serving", async () => {
    const client = await tenant("bo1");
    await publish(client, { name: "deep", nodes: [{ id: "a", kind: "code", handler: "deep", input: { levels: 600 } }] });
    const done = await settled(client, ((await client.startRun({ definition: "deep" })).run as View).id);
    expect(done.status).toBe("failed");
    expect(done.nodes.a).toMatchObject({ status: "failed", attempt: 1, error: { code: "bad_output" } });
    await publish(client, { name: "fine", nodes: [{ id: "a", kind: "code", handler: "deep", input: { levels: 20 } }] });
    expect((await settled(client, ((await client.startRun({ definition: "fine" })).run as View).id)).status).toBe("succeeded");
  });
});

describe("starts", () => {
  it("C017 a start told its key is new (an A2A task's record just created) whose key made a run after all answers that run, duplicate, counted once by its tenant", async () => {
    const client = await tenant("st2");
    await publish(client, { name: "nap", nodes: [{ id: "a", kind: "sleep", duration_ms: 3_600_000 }] });
    const key = { source: "a2a", delivery_id: "agent/m-1" };
    const first = await client.startRun({ definition: "nap", start_key: key });
    expect(first.outcome).toBe("started");
    const id = (first.run as View).id;
    const again = await world.node.runs.start("st2", { definition: "nap", start_key: key }, { newKey: true });
    expect(again.outcome).toBe("duplicate");
    expect((again as { run: View }).run.id).toBe(id);
    const t = (await client.getTenant()).tenant as { active_runs: number; queued_runs: number; starts_today: number };
    expect([t.active_runs, t.queued_runs, t.starts_today]).toEqual([1, 0, 1]);
    expect((await client.cancelRun(id)).outcome).toBe("cancelled");
  });

  it("C017 one start key, another definition (or bad input) in a later delivery: the answer is the first run, duplicate", async () => {
    const client = await tenant("st1");
    await publish(client, {
      name: "one",
      input_schema: { type: "object", required: ["n"], properties: { n: { type: "number" } } },
      nodes: [{ id: "a", kind: "code", handler: "noop" }],
    });
    await publish(client, { name: "other", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
    const key = { source: "webhook", delivery_id: "d-17" };
    const first = await client.startRun({ definition: "one", input: { n: 1 }, start_key: key });
    expect(first.outcome).toBe("started");
    const id = (first.run as View).id;
    for (const later of [
      { definition: "other" },
      { definition: "nowhere" },
      { definition: "one", input: { n: "not a number" } },
      { definition: "one", input: { blob: "x".repeat(40_000) } },
    ]) {
      const again = await client.startRun({ ...later, start_key: key });
      expect(again.outcome, JSON.stringify(later).slice(0, 80)).toBe("duplicate");
      expect((again.run as View).id).toBe(id);
      expect((again.run as View).definition.name).toBe("one");
    }
  });

  it("C037 the lane comes from who asks: the API's services start batch and cannot take the interactive lane; a source the tenant lists starts interactive by default", async () => {
    const client = await tenant("st2");
    await publish(client, { name: "one", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
    const api = (await client.startRun({ definition: "one" })).run as View;
    expect((await view(client, api.id)).lane).toBe("batch");
    const asked = await client.startRun({ definition: "one", lane: "interactive" });
    expect(asked.outcome).toBe("lane_not_allowed");
    const keyed = await client.startRun({ definition: "one", lane: "interactive", start_key: { source: "cron", delivery_id: "1" } });
    expect(keyed.outcome).toBe("lane_not_allowed");
    const cli = (await client.startRun({ definition: "one", source: "cli" })).run as View;
    expect((await view(client, cli.id)).lane).toBe("interactive");
    expect((await client.putTenant({ interactive_sources: ["console"] })).outcome).toBe("updated");
    await waitFor(async () => (await client.startRun({ definition: "one", source: "console", lane: "interactive" })).outcome === "started" || undefined, {
      timeoutMs: 5_000,
      describe: "the tenant's new interactive sources to apply",
    });
    const console_ = (await client.startRun({ definition: "one", source: "console" })).run as View;
    expect((await view(client, console_.id)).lane).toBe("interactive");
    expect((await client.startRun({ definition: "one", source: "cli", lane: "interactive" })).outcome).toBe("lane_not_allowed");
    expect((await client.startRun({ definition: "one", source: "cli", lane: "migration" })).outcome).toBe("started");
  });

  it("C033 a start refused for the day cap leaves exactly one decision on the audit stream, with no run id; an allowed start writes none there", async () => {
    const client = await tenant("st3", { day_cap: 1 });
    await publish(client, { name: "one", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
    const jsm = await jetstreamManager(world.nc);
    const count = async () =>
      (await jsm.streams.info("RUNWAY_AUDIT", { subjects_filter: "rw.audit.st3.admission" })).state.subjects?.["rw.audit.st3.admission"] ?? 0;
    expect((await client.startRun({ definition: "one" })).outcome).toBe("started");
    expect(await count()).toBe(0);
    expect((await client.startRun({ definition: "one" })).outcome).toBe("day_cap_reached");
    expect(await count()).toBe(1);
    const last = await jsm.streams.getMessage("RUNWAY_AUDIT", { last_by_subj: "rw.audit.st3.admission" });
    expect(last!.json()).toMatchObject({ type: "start_refused", code: "day_cap_reached", tenant: "st3", run_id: null });
  });
});
