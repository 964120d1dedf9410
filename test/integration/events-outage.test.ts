import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { Msg } from "@nats-io/transport-node";
import { EVENTS_STREAM, eventsStreamConfig, runIdFor, startKey } from "../../actors/index.js";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * DESIGN invariant 11: progress streams can fail while durable work continues, and the durable
 * record wins. Progress events are `runway.event` effects: stored in the run's outbox, published
 * by the node's event spool in the background, never holding a command's acknowledgement.
 */
const world = workflowWorld();
const dir = mkdtempSync(join(tmpdir(), "runway-events-"));
const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface ProgressEvent {
  type: string;
  run: string;
  at: number;
  node?: string;
  item?: number;
  child?: string;
}
interface Stored {
  seq: number;
  subject: string;
  msgId: string;
  event: ProgressEvent;
}

/** Every message of RUNWAY_EVT under `filter`, in stream order. */
async function streamEvents(filter: string): Promise<Stored[]> {
  const consumer = await jetstream(world.nc).consumers.get(EVENTS_STREAM, { filter_subjects: [filter], deliver_policy: DeliverPolicy.All });
  const out: Stored[] = [];
  const batch = await consumer.fetch({ max_messages: 10_000, expires: 1_000 });
  for await (const m of batch) {
    out.push({ seq: m.seq, subject: m.subject, msgId: m.headers?.get("Nats-Msg-Id") ?? "", event: m.json<ProgressEvent>() });
    if (m.info.pending === 0) break;
  }
  return out;
}

async function publishDefinition(definition: { name: string; nodes: unknown[] }): Promise<void> {
  const put = await world.client.putDefinition(definition);
  expect(["published", "unchanged"], JSON.stringify(put)).toContain(put.outcome);
}

async function start(definition: string, input: unknown, delivery: string): Promise<string> {
  const started = await world.client.startRun({ definition, input, start_key: { source: "events-test", delivery_id: delivery } });
  expect(started.outcome, JSON.stringify(started)).toBe("started");
  return (started.run as RunAnswer).id;
}

function metric(name: string): unknown {
  return (world.node.metrics.json().metrics as Record<string, unknown>)[name];
}

/** A gated step (released by the test), a map, a durable sleep and a last step: sends, timers and events. */
const gatedFlow = {
  name: "events-gated",
  nodes: [
    { id: "gate", kind: "code", handler: "wait_file", input: { path: "${input.gate}" } },
    { id: "fan", kind: "map", needs: ["gate"], items: "${input.items}", handler: "echo", max_fanout: 5 },
    { id: "nap", kind: "sleep", needs: ["fan"], duration_ms: 100 },
    { id: "last", kind: "code", needs: ["nap"], handler: "echo", input: "done" },
  ],
};

/** Starts `n` gated runs and waits until each one's gate step is active, i.e. every run is mid-way. */
async function gatedRuns(label: string, n: number): Promise<{ runs: string[]; release(): void }> {
  await publishDefinition(gatedFlow);
  const gate = join(dir, `gate-${label}`);
  const runs: string[] = [];
  for (let i = 0; i < n; i++) runs.push(await start(gatedFlow.name, { gate, items: [1, 2, 3] }, `${label}-${i}`));
  for (const run of runs) {
    await waitFor(async () => ((await world.client.getRun(run)).run as RunAnswer).nodes.gate?.status === "active", {
      timeoutMs: 15_000,
      describe: `run ${run}'s gate step to be active`,
    });
  }
  return { runs, release: () => writeFileSync(gate, "") };
}

/** Causal order of one run's events as stored: what a watcher reads must make sense in stream order. */
function expectOrdered(events: Stored[], run: string): void {
  const types = events.map((s) => `${s.event.type}${s.event.node ? `:${s.event.node}` : ""}`);
  const at = (t: string) => types.indexOf(t);
  expect(new Set(events.map((s) => s.msgId)).size, `no event stored twice: ${types.join(" ")}`).toBe(events.length);
  for (let i = 1; i < events.length; i++)
    expect(events[i]!.event.at, `times of ${run} in stream order: ${types.join(" ")}`).toBeGreaterThanOrEqual(events[i - 1]!.event.at);
  expect(types.at(-1), types.join(" ")).toBe("run_succeeded");
  expect(at("step_succeeded:gate"), types.join(" ")).toBeGreaterThanOrEqual(0);
  expect(at("step_succeeded:gate")).toBeLessThan(at("step_started:last"));
  expect(at("step_started:last")).toBeLessThan(at("step_succeeded:last"));
  for (const s of events) {
    expect(s.event.run).toBe(run);
    expect(s.subject).toBe(`rw.evt.t1.${run}.${run}.${s.event.type}`);
  }
}

describe("progress events", () => {
  it("C130 a child run's events reach the root run's subject tree, live and in the stream", async () => {
    await publishDefinition({ name: "c130-leaf", nodes: [{ id: "work", kind: "code", handler: "echo", input: "leaf" }] });
    await publishDefinition({
      name: "c130-mid",
      nodes: [
        { id: "pre", kind: "code", handler: "noop" },
        { id: "leaf", kind: "subworkflow", needs: ["pre"], workflow: "c130-leaf" },
      ],
    });
    await publishDefinition({
      name: "c130-root",
      nodes: [
        { id: "mid", kind: "subworkflow", workflow: "c130-mid" },
        { id: "after", kind: "code", needs: ["mid"], handler: "noop" },
      ],
    });
    // The root's id is known before it starts, so a subscriber can be there from the first event.
    const root = runIdFor("t1", startKey("events-test", "c130"));
    const live: Msg[] = [];
    const sub = world.nc.subscribe(`rw.evt.t1.${root}.>`, { callback: (_err, m) => void live.push(m) });
    try {
      await world.nc.flush();
      expect(await start("c130-root", {}, "c130")).toBe(root);
      expect((await settled(world.client, root)).status).toBe("succeeded");
      const liveEvents = () => live.map((m) => m.json<ProgressEvent>());
      await waitFor(() => liveEvents().filter((e) => e.type === "run_succeeded").length === 3, {
        timeoutMs: 10_000,
        describe: `run_succeeded of ${root}, its child and its grandchild on rw.evt.t1.${root}.>`,
      });
      const byRun = (events: ProgressEvent[]) => {
        const out = new Map<string, string[]>();
        for (const e of events) out.set(e.run, [...(out.get(e.run) ?? []), `${e.type}${e.node ? `:${e.node}` : ""}`]);
        return out;
      };
      const seen = byRun(liveEvents());
      expect([...seen.keys()]).toHaveLength(3);
      const mid = liveEvents().find((e) => e.run === root && e.type === "step_started" && e.node === "mid")?.child;
      expect(mid, JSON.stringify(liveEvents())).toBeDefined();
      const leaf = liveEvents().find((e) => e.run === mid && e.type === "step_started" && e.node === "leaf")?.child;
      expect(leaf, JSON.stringify(liveEvents())).toBeDefined();
      expect(seen.get(root)).toEqual(
        expect.arrayContaining(["run_started", "step_started:mid", "step_succeeded:mid", "step_succeeded:after", "run_succeeded"]),
      );
      expect(seen.get(mid!)).toEqual(
        expect.arrayContaining(["run_started", "step_started:pre", "step_succeeded:pre", "step_started:leaf", "step_succeeded:leaf", "run_succeeded"]),
      );
      expect(seen.get(leaf!)).toEqual(expect.arrayContaining(["run_started", "step_started:work", "step_succeeded:work", "run_succeeded"]));
      for (const m of live) {
        const [, , tenant, treeRoot, run, type] = m.subject.split(".");
        expect([tenant, treeRoot, run, type]).toEqual(["t1", root, m.json<ProgressEvent>().run, m.json<ProgressEvent>().type]);
      }
      // A consumer on the root's subject tree reads the same history from the stream.
      const stored = await waitFor(
        async () => {
          const s = await streamEvents(`rw.evt.t1.${root}.>`);
          return s.length === live.length ? s : undefined;
        },
        { timeoutMs: 10_000, describe: `the stream to hold the ${live.length} events of ${root}'s tree` },
      );
      expect(byRun(stored.map((s) => s.event))).toEqual(seen);
    } finally {
      sub.unsubscribe();
    }
  });

  it("C129 with RUNWAY_EVT deleted mid-run, runs still succeed; recreated, the spooled events arrive in order", async () => {
    const jsm = await jetstreamManager(world.nc);
    const { runs, release } = await gatedRuns("deleted", 3);
    const publishedBefore = metric("events_published") as number;
    expect(await jsm.streams.delete(EVENTS_STREAM)).toBe(true);
    try {
      release();
      // Every transition after the gate (map items, the sleep's timer, the last step, the end)
      // publishes events into nothing; commands and timers are unaffected. Before the spool a
      // missing stream held every command unacknowledged: runs did not finish within this deadline.
      for (const run of runs) {
        const done = await settled(world.client, run);
        expect(done.status, `${run}: ${JSON.stringify(done)}`).toBe("succeeded");
        expect(done.nodes.last?.status).toBe("succeeded");
      }
      expect(world.node.node.host.events.spooled).toBeGreaterThan(0);
      expect(metric("events_spooled")).toBe(world.node.node.host.events.spooled);

      // `runway run watch` cannot read events now; it ends on the run's record.
      const watch = spawnTsx(
        cli,
        ["run", "watch", runs[0]!, "--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--tenant", "t1"],
        { name: "runway run watch" },
      );
      const exit = await watch.exited;
      expect(exit.code, watch.lines.join("\n")).toBe(0);
      expect(watch.lines.join("\n")).toMatch(/record\s+run_succeeded/);
    } finally {
      await jsm.streams.add(eventsStreamConfig(1));
    }
    await waitFor(() => world.node.node.host.events.spooled === 0, {
      timeoutMs: 15_000,
      describe: "the node's event spool to drain into the recreated stream",
    });
    for (const run of runs) expectOrdered(await streamEvents(`rw.evt.t1.*.${run}.*`), run);
    expect(metric("events_published") as number).toBeGreaterThan(publishedBefore);
    expect(metric("events_dropped")).toEqual({ "reason=full": 0, "reason=rejected": 0, "reason=stopped": 0 });
  });

  // The stream's server keeping JetStream while this stream alone is unavailable would need
  // per-server placement tags the harness does not set; moving the stream's subjects away gives
  // the same answer to a publisher (no responders) and keeps the history from before the outage.
  it("C129 with RUNWAY_EVT not capturing rw.evt.> for a while, each run's whole history arrives complete and in order", async () => {
    const jsm = await jetstreamManager(world.nc);
    const { runs, release } = await gatedRuns("moved", 2);
    await waitFor(async () => (await streamEvents(`rw.evt.t1.*.${runs[1]!}.*`)).some((s) => s.event.type === "step_started" && s.event.node === "gate"), {
      timeoutMs: 10_000,
      describe: "the gate's step_started in the stream",
    });
    const config = eventsStreamConfig(1);
    await jsm.streams.update(EVENTS_STREAM, { ...config, subjects: ["rw.evt-offline.>"] });
    try {
      release();
      for (const run of runs) expect((await settled(world.client, run)).status).toBe("succeeded");
      expect(world.node.node.host.events.spooled).toBeGreaterThan(0);
    } finally {
      await jsm.streams.update(EVENTS_STREAM, config);
    }
    await waitFor(() => world.node.node.host.events.spooled === 0, { timeoutMs: 15_000, describe: "the node's event spool to drain" });
    for (const run of runs) {
      const events = await streamEvents(`rw.evt.t1.*.${run}.*`);
      expect(events[0]?.event.type).toBe("run_started");
      expectOrdered(events, run);
      // Complete: every node and map item started once, and every node ended once.
      const types = events.map((s) => `${s.event.type}:${s.event.node ?? ""}${s.event.item !== undefined ? `[${s.event.item}]` : ""}`);
      const count = (t: string) => types.filter((x) => x === t).length;
      for (const node of ["gate", "fan", "nap", "last"])
        expect([count(`step_started:${node}`), count(`step_succeeded:${node}`)], `${node}: ${types.join(" ")}`).toEqual([1, 1]);
      for (const item of [0, 1, 2]) expect(count(`step_started:fan[${item}]`), types.join(" ")).toBe(1);
    }
  });
});
