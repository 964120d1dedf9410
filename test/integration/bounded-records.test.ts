import { expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { RUN_KIND } from "../../actors/index.js";
import { kvSubject, partitionBucket, partitionOf, partitionStream } from "../../runtime/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * Issue 9, acceptance 1: no record grows with a run's history. A run's head holds its state, not
 * its history; its input and outputs are facts in its journal, written once. Checked on the
 * stored bytes: every message in every KV stream, and the size of a run's writes over time.
 */
const world = workflowWorld({ name: "bounded-node", scheduler: { slots: 16, interactive_reserve: 0 } });

const KIB = 1024;

/** The size of every record a run stored, oldest first (its journal, as raw messages). */
async function writeSizes(runId: string): Promise<number[]> {
  const jsm = await jetstreamManager(world.nc);
  const p = partitionOf(runId, 32);
  const subject = kvSubject(partitionBucket(p), `${RUN_KIND}.${runId}`);
  const sizes: number[] = [];
  for (let seq = 1; ;) {
    let got = 0;
    for await (const m of await jsm.direct.getBatch(partitionStream(p), { seq, next_by_subj: subject, batch: 1_000 })) {
      got++;
      seq = m.seq + 1;
      sizes.push(m.data.length);
    }
    if (got < 1_000) return sizes;
  }
}

/** The largest message of every KV stream (every record ever stored, journals included). */
async function largestRecords(): Promise<{ stream: string; bytes: number }[]> {
  const jsm = await jetstreamManager(world.nc);
  const out: { stream: string; bytes: number }[] = [];
  for await (const si of jsm.streams.list()) {
    if (!si.config.name.startsWith("KV_") || si.state.messages === 0) continue;
    let largest = 0;
    for (let seq = si.state.first_seq; seq <= si.state.last_seq;) {
      let got = 0;
      for await (const m of await jsm.direct.getBatch(si.config.name, { seq, batch: 1_000 })) {
        got++;
        seq = m.seq + 1;
        largest = Math.max(largest, m.data.length);
      }
      if (got === 0) break;
    }
    out.push({ stream: si.config.name, bytes: largest });
  }
  return out;
}

it("a 1,000-item map with 8 KiB outputs and a 10,000-step sequential run both succeed; no stored record is over 64 KiB; a write at step 10,000 costs what one at step 10 does", async () => {
  const client = world.clientFor("big");
  expect(
    (await client.createTenant("big", { expansion_limits: { max_children: 1_000, max_total_steps: 20_000, max_active_descendants: 20_000 } })).outcome,
  ).toMatch(/created|exists/);
  await client.putDefinition({
    name: "wide",
    nodes: [{ id: "m", kind: "map", items: "${input.items}", handler: "big", input: { bytes: 8 * KIB }, max_fanout: 1_000, concurrency: 16 }],
    result: { count: "${steps.m.status}" },
  });
  // Ten maps of 1,000 items, one item at a time: 10,000 steps one after another.
  const chain = Array.from({ length: 10 }, (_, i) => ({
    id: `m${i}`,
    kind: "map",
    items: "${input.items}",
    handler: "noop",
    max_fanout: 1_000,
    concurrency: 1,
    ...(i > 0 ? { needs: [`m${i - 1}`] } : {}),
  }));
  await client.putDefinition({ name: "long", nodes: chain, result: { last: "${steps.m9.status}" } });
  const items = Array.from({ length: 1_000 }, (_, i) => i);

  const wide = ((await client.startRun({ definition: "wide", input: { items } })).run as RunAnswer).id;
  const wideDone = await settled(client, wide);
  expect(wideDone.status, JSON.stringify(wideDone.error)).toBe("succeeded");
  expect(wideDone.result).toEqual({ count: "succeeded" });

  const long = ((await client.startRun({ definition: "long", input: { items } })).run as RunAnswer).id;
  const longDone = await waitSettled(client, long);
  expect(longDone.status, JSON.stringify(longDone.error)).toBe("succeeded");

  const sizes = await writeSizes(long);
  expect(sizes.length).toBeGreaterThanOrEqual(10_000);
  // Around step 10 and around step 10,000 (a median of eleven writes, so a write that also starts the next map does not decide it).
  const around = (i: number) => sizes.slice(i - 5, i + 6).sort((a, b) => a - b)[5]!;
  const early = around(10);
  const late = around(10_000);
  console.log(
    `bounded records: the 10,000-step run stored ${sizes.length} records; bytes at write 10: ${early}, at write 10,000: ${late}, largest ${Math.max(...sizes)}`,
  );
  expect(late / early).toBeLessThan(2);
  expect(early / late).toBeLessThan(2);

  const largest = await largestRecords();
  console.log(`bounded records: largest message per KV stream ${JSON.stringify(largest.filter((l) => l.bytes > 4 * KIB))}`);
  for (const l of largest) expect(l.bytes, l.stream).toBeLessThan(64 * KIB);
}, 600_000);

/** A 10,000-step run takes a while on a busy machine: wait for it with a deadline of its own. */
async function waitSettled(client: ReturnType<typeof world.clientFor>, id: string): Promise<RunAnswer> {
  const deadline = Date.now() + 480_000;
  for (;;) {
    const run = (await client.getRun(id)).run as RunAnswer;
    if (["succeeded", "failed", "cancelled"].includes(run.status)) return run;
    if (Date.now() > deadline) throw new Error(`run ${id} still ${run.status} after 480 s`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
