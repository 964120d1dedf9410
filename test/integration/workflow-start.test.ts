import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { childStartKey, runIdFor, startKey } from "../../actors/index.js";
import { MailboxClient, partitionBucket } from "../../runtime/index.js";
import { Kvm } from "@nats-io/kv";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld();
const dir = mkdtempSync(join(tmpdir(), "runway-wf-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const counted = (name: string, file: string) => ({
  name,
  nodes: [
    { id: "one", kind: "code", handler: "count_invocations", input: { file, value: "${input.v}" } },
    { id: "two", kind: "code", needs: ["one"], handler: "count_invocations", input: { file, value: "${steps.one.output}" } },
  ],
});

async function runKeys(tenant: string): Promise<string[]> {
  const kvm = new Kvm(world.nc);
  const out: string[] = [];
  for (let p = 0; p < 32; p++) for await (const k of await (await kvm.open(partitionBucket(p))).keys("run.*")) if (k.startsWith(`run.${tenant}_`)) out.push(k);
  return out;
}

describe("starting runs", () => {
  it("a duplicate start returns the same run and the same result, and executes nothing twice", async () => {
    const file = join(dir, "dup.txt");
    expect((await world.client.putDefinition(counted("dup-flow", file))).outcome).toBe("published");
    const key = { source: "webhook", delivery_id: "evt-1" };
    const first = await world.client.startRun({ definition: "dup-flow", input: { v: 7 }, start_key: key });
    expect(first.outcome).toBe("started");
    const runId = (first.run as RunAnswer).id;
    const done = await settled(world.client, runId);
    expect(done.status).toBe("succeeded");
    const again = await world.client.startRun({ definition: "dup-flow", input: { v: 999 }, start_key: key });
    expect(again.outcome).toBe("duplicate");
    expect((again.run as RunAnswer).id).toBe(runId);
    expect((again.run as RunAnswer).result).toEqual(done.result);
    expect(readFileSync(file, "utf8").trim().split("\n")).toHaveLength(2);
  });

  it("twenty concurrent starts on one key: one started, nineteen duplicate", async () => {
    expect((await world.client.putDefinition({ name: "twenty", nodes: [{ id: "a", kind: "code", handler: "noop" }] })).outcome).toBe("published");
    const key = { source: "queue", delivery_id: "m-20" };
    const answers = await Promise.all(Array.from({ length: 20 }, () => world.client.startRun({ definition: "twenty", start_key: key })));
    const outcomes = answers.map((a) => a.outcome).sort();
    expect(outcomes.filter((o) => o === "started")).toHaveLength(1);
    expect(outcomes.filter((o) => o === "duplicate")).toHaveLength(19);
    expect(new Set(answers.map((a) => (a.run as RunAnswer).id)).size).toBe(1);
  });

  it("a start whose create was stored but never answered: the retry answers duplicate with the same run; a key nothing was stored for starts exactly one", async () => {
    expect((await world.client.putDefinition({ name: "crashy-start", nodes: [{ id: "a", kind: "code", handler: "noop" }] })).outcome).toBe("published");
    // The create command stored, as a crash before the caller heard back leaves it: the run exists once.
    const key = { source: "cron", delivery_id: "tick-1" };
    const id = runIdFor("t1", startKey(key.source, key.delivery_id));
    const def = (await world.client.getDefinition("crashy-start")) as unknown as { ref: { name: string; version: number; digest: string } };
    const mailbox = new MailboxClient(world.nc, 32);
    const seed = {
      id,
      tenant: "t1",
      root_run_id: id,
      parent_run_id: null,
      parent_node: null,
      depth: 0,
      definition: def.ref,
      source: key.source,
      start_key: startKey(key.source, key.delivery_id),
      lane: "interactive",
      input: {},
    };
    expect((await mailbox.send({ kind: "run", id }, { type: "run.create", run: seed }, `create/${id}`)).outcome).toBe("stored");
    const retry = await world.client.startRun({ definition: "crashy-start", start_key: key });
    expect(retry.outcome).toBe("duplicate");
    expect((retry.run as RunAnswer).id).toBe(id);
    // Nothing stored for this key, as a crash before the store leaves it (a real SIGKILL there: C010 in test/chaos/start-crash.test.ts).
    const fresh = { source: "cron", delivery_id: "tick-2" };
    expect(await runKeys("t1")).not.toContain(`run.${runIdFor("t1", startKey(fresh.source, fresh.delivery_id))}`);
    const started = await world.client.startRun({ definition: "crashy-start", start_key: fresh });
    expect(started.outcome).toBe("started");
    expect((await runKeys("t1")).filter((k) => k === `run.${(started.run as RunAnswer).id}`)).toHaveLength(1);
  });

  it("another tenant's definition answers definition_not_found, exactly like a missing one", async () => {
    expect((await world.clientFor("t2").putDefinition({ name: "secret-flow", nodes: [{ id: "a", kind: "code", handler: "noop" }] })).outcome).toBe("published");
    const other = await world.client.startRun({ definition: "secret-flow" });
    const missing = await world.client.startRun({ definition: "no-such-flow" });
    expect(other).toEqual({ outcome: "definition_not_found" });
    expect(missing).toEqual(other);
    expect(await world.client.getDefinition("secret-flow")).toEqual(await world.client.getDefinition("no-such-flow"));
  });

  it("a draft answers definition_not_published", async () => {
    expect((await world.client.putDefinition({ name: "drafty", nodes: [{ id: "a", kind: "code", handler: "noop" }] }, false)).outcome).toBe("draft_saved");
    expect((await world.client.startRun({ definition: "drafty" })).outcome).toBe("definition_not_published");
  });

  it("an input over 32 KiB answers input_too_large and creates no run", async () => {
    expect((await world.client.putDefinition({ name: "big-input", nodes: [{ id: "a", kind: "code", handler: "noop" }] })).outcome).toBe("published");
    const before = await runKeys("t1");
    const answer = await world.client.startRun({
      definition: "big-input",
      input: { blob: "x".repeat(33 * 1024) },
      start_key: { source: "s", delivery_id: "big" },
    });
    expect(answer.outcome).toBe("input_too_large");
    expect(await runKeys("t1")).toEqual(before);
  });

  it("an input that fails the definition's schema answers invalid_input and creates no run", async () => {
    const def = {
      name: "typed",
      input_schema: { type: "object", required: ["n"], properties: { n: { type: "integer" } } },
      nodes: [{ id: "a", kind: "code", handler: "noop" }],
    };
    expect((await world.client.putDefinition(def)).outcome).toBe("published");
    const answer = await world.client.startRun({ definition: "typed", input: { n: "seven" } });
    expect(answer.outcome).toBe("invalid_input");
  });

  it("a retried subworkflow node meets duplicate; the tree ends with one child", async () => {
    expect((await world.client.putDefinition({ name: "kid", nodes: [{ id: "k", kind: "code", handler: "slow", input: { ms: 300 } }] })).outcome).toBe(
      "published",
    );
    expect((await world.client.putDefinition({ name: "parent", nodes: [{ id: "spawn", kind: "subworkflow", workflow: "kid" }] })).outcome).toBe("published");
    const started = await world.client.startRun({ definition: "parent" });
    const parent = (started.run as RunAnswer).id;
    const child = runIdFor("t1", childStartKey(parent, "spawn"));
    // The node's start delivered again (as a retry would): the child answers refused (a duplicate).
    const def = (await world.client.getDefinition("kid")) as unknown as { ref: { name: string; version: number; digest: string } };
    const seed = {
      id: child,
      tenant: "t1",
      root_run_id: parent,
      parent_run_id: parent,
      parent_node: "spawn",
      depth: 1,
      definition: def.ref,
      source: "workflow_step",
      start_key: `${parent}:spawn`,
      lane: "batch",
      input: {},
    };
    const mailbox = new MailboxClient(world.nc, 32);
    const again = await mailbox.request({ kind: "run", id: child }, { type: "run.create", run: seed }, `create-retry/${child}`);
    expect(again.outcome).toBe("refused");
    const done = await settled(world.client, parent);
    expect(done.status).toBe("succeeded");
    expect((await runKeys("t1")).filter((k) => k === `run.${child}`)).toHaveLength(1);
    const kid = (await world.client.getRun(child)).run as RunAnswer & { parent_run_id: string; root_run_id: string; lane: string };
    expect(kid.parent_run_id).toBe(parent);
    expect(kid.root_run_id).toBe(parent);
    expect(kid.lane).toBe("batch");
  });
});
