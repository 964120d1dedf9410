import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { connect, type Msg } from "@nats-io/transport-node";
import { runIdFor, startKey } from "../../actors/index.js";
import { followRun, type FollowedEvent } from "../../cluster/follow.js";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { settled, workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * DESIGN invariant 11: progress streams can fail while durable work continues, and the durable
 * record wins. A run's progress events are entries of the records its transitions store (its
 * journal); they are published live as plain NATS messages, never awaited, and read back from
 * the journal (`runs.events`) with the ids they were published with.
 */
const world = workflowWorld();
const dir = mkdtempSync(join(tmpdir(), "runway-events-"));
const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Event = FollowedEvent & { node?: string; item?: number; child?: string };

async function publishDefinition(definition: { name: string; nodes: unknown[] }): Promise<void> {
  const put = await world.client.putDefinition(definition);
  expect(["published", "unchanged"], JSON.stringify(put)).toContain(put.outcome);
}

async function start(definition: string, input: unknown, delivery: string): Promise<string> {
  const started = await world.client.startRun({ definition, input, start_key: { source: "events-test", delivery_id: delivery } });
  expect(started.outcome, JSON.stringify(started)).toBe("started");
  return (started.run as RunAnswer).id;
}

/** Every stored event of a run after `after`, page by page (`limit` per page). */
async function stored(run: string, after?: string, limit?: number): Promise<Event[]> {
  const out: Event[] = [];
  for (let cursor = after; ;) {
    const page = await world.client.runEvents(run, { ...(cursor ? { after: cursor } : {}), ...(limit ? { limit } : {}) });
    expect(page.outcome, JSON.stringify(page)).toBe("events");
    out.push(...(page.events as Event[]));
    cursor = page.last as string;
    if (!page.more) return out;
  }
}

const order = (id: string) => id.split(".").map(Number) as [number, number];
const before = (a: string, b: string) => order(a)[0] < order(b)[0] || (order(a)[0] === order(b)[0] && order(a)[1] < order(b)[1]);
const label = (e: Event) => `${e.type}${e.node ? `:${e.node}` : ""}${e.item !== undefined ? `[${e.item}]` : ""}`;

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

/** A gated run's stored history, whole and in order: each id once and increasing, times in order, every node's outcome once, the end last. */
function expectWholeHistory(events: Event[], run: string): void {
  const labels = events.map(label).join(" ");
  for (let i = 1; i < events.length; i++) {
    expect(before(events[i - 1]!.id!, events[i]!.id!), `ids increase: ${labels}`).toBe(true);
    expect(events[i]!.at, `times in order: ${labels}`).toBeGreaterThanOrEqual(events[i - 1]!.at);
  }
  expect(events[0]?.type, labels).toBe("run_started");
  expect(events.at(-1)?.type, labels).toBe("run_succeeded");
  const count = (l: string) => events.filter((e) => label(e) === l).length;
  for (const node of ["gate", "fan", "nap", "last"]) expect(count(`step_succeeded:${node}`), `${node}: ${labels}`).toBe(1);
  for (const e of events) expect(e.run).toBe(run);
}

describe("progress events", () => {
  it("C130 a child run's events reach the root run's subject tree live, and each run's journal holds its stored ones with the same ids", async () => {
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
      const liveEvents = () => live.map((m) => m.json<Event>());
      await waitFor(() => liveEvents().filter((e) => e.type === "run_succeeded").length === 3, {
        timeoutMs: 10_000,
        describe: `run_succeeded of ${root}, its child and its grandchild on rw.evt.t1.${root}.>`,
      });
      const byRun = (events: Event[]) => {
        const out = new Map<string, string[]>();
        for (const e of events) out.set(e.run, [...(out.get(e.run) ?? []), label(e)]);
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
        expect([tenant, treeRoot, run, type]).toEqual(["t1", root, m.json<Event>().run, m.json<Event>().type]);
      }
      // Read back from each run's journal: exactly the live events that carry an id (the
      // executor's step_started is live only), in the order they were published.
      for (const run of [root, mid!, leaf!]) {
        const withIds = liveEvents().filter((e) => e.run === run && e.id !== undefined);
        expect(await stored(run)).toEqual(withIds);
      }
    } finally {
      sub.unsubscribe();
    }
  });

  // Not C129: the subscriber's own connection closing touches nothing of the node's; C129 is in test/integration/actor-limits.test.ts.
  it("a subscriber that disconnects mid-run: the runs complete, and the journal gives the rest of each history after the last id it saw, each event once and in order", async () => {
    const { runs, release } = await gatedRuns("killed", 2);
    const watcher = await connect(world.server.connectOptions());
    const seen = new Map<string, Event[]>(runs.map((r) => [r, []]));
    watcher.subscribe("rw.evt.t1.*.*.*", {
      callback: (_err, m) => {
        const e = m.json<Event>();
        if (e.id !== undefined) seen.get(e.run)?.push(e);
      },
    });
    await watcher.flush();
    // It hears each run's map end, then its process is gone.
    release();
    await waitFor(() => runs.every((r) => seen.get(r)!.some((e) => e.type === "step_succeeded" && e.node === "fan")) || undefined, {
      timeoutMs: 15_000,
      describe: "the subscriber to hear each run's map end",
    });
    await watcher.close();
    for (const run of runs) {
      const done = await settled(world.client, run);
      expect(done.status, `${run}: ${JSON.stringify(done)}`).toBe("succeeded");
      expect(done.nodes.last?.status).toBe("succeeded");
    }
    for (const run of runs) {
      // What it saw before it died was published after it subscribed: the rest is stored.
      const heard = seen.get(run)!;
      const rest = await stored(run, heard.at(-1)!.id);
      expect(rest.length).toBeGreaterThan(0);
      const whole = await stored(run);
      expect(whole.slice(whole.length - rest.length)).toEqual(rest);
      expectWholeHistory(whole, run);
      // Paged two at a time, the same history.
      expect(await stored(run, undefined, 2)).toEqual(whole);
    }
  });

  it("a follower started mid-run gets each event once and in order: the stored ones from the journal, then live ones, until the run ends", async () => {
    const { runs, release } = await gatedRuns("follow", 1);
    const run = runs[0]!;
    const got: Event[] = [];
    const following = (async () => {
      for await (const e of followRun(world.nc, world.client, "t1", run, { pollMs: 200 })) {
        got.push(e as Event);
        if (got.length === 1) release();
      }
    })();
    await following;
    const labels = got.map(label);
    expect(labels[0], labels.join(" ")).toBe("run_started");
    expect(labels.at(-1), labels.join(" ")).toBe("run_succeeded");
    // Stored events: each once, in order, exactly the journal's.
    const storedOnes = got.filter((e) => e.id !== undefined);
    expect(storedOnes).toEqual(await stored(run));
    expectWholeHistory(storedOnes, run);
    // The last step's start is live only; it came before its outcome.
    expect(labels.indexOf("step_started:last"), labels.join(" ")).toBeGreaterThanOrEqual(0);
    expect(labels.indexOf("step_started:last")).toBeLessThan(labels.indexOf("step_succeeded:last"));
  });

  it("a retried step's failures are stored events: step_retrying per failed attempt, in order, for a follower and a reader alike", async () => {
    await publishDefinition({
      name: "events-retry",
      nodes: [{ id: "flaky", kind: "code", handler: "fail_until", input: { until: 3 }, retry: { max_attempts: 5, backoff_ms: 50, max_backoff_ms: 50 } }],
    });
    const run = await start("events-retry", {}, "retry");
    const got: Event[] = [];
    for await (const e of followRun(world.nc, world.client, "t1", run, { pollMs: 200 })) got.push(e as Event);
    const all = await stored(run);
    const retries = all.filter((e) => e.type === "step_retrying").map((e) => e.attempt);
    expect(retries, all.map(label).join(" ")).toEqual([1, 2]);
    expect(got.filter((e) => e.id !== undefined)).toEqual(all);
    // Live-only starts: each at most once, before its attempt's outcome.
    const labels = got.map((e) => `${e.type}#${String(e.attempt ?? "")}`);
    expect(new Set(labels).size, labels.join(" ")).toBe(labels.length);
    for (const [a, outcome] of [
      [1, "step_retrying"],
      [2, "step_retrying"],
      [3, "step_succeeded"],
    ] as const) {
      const startedAt = labels.indexOf(`step_started#${a}`);
      expect(labels.indexOf(`${outcome}#${a}`), labels.join(" ")).toBeGreaterThan(startedAt);
    }
  });

  it("runs.events answers closed codes for bad input: a malformed id, another tenant's run, an unknown run", async () => {
    await publishDefinition({ name: "events-one", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
    const run = await start("events-one", {}, "bad-input");
    await settled(world.client, run);
    for (const after of ["", "1", "1.2.3", "0.1", "x.y", "1.-1", "99999999999999999.0"]) {
      const answer = await world.client.runEvents(run, { after });
      expect(answer.outcome, `after ${JSON.stringify(after)}: ${JSON.stringify(answer)}`).toBe("invalid_input");
    }
    expect((await world.client.call(`runway.v1.t1.runs.events`, { run_id: run, limit: 0 })).outcome).toBe("invalid_input");
    expect((await world.client.call(`runway.v1.t1.runs.events`, { run_id: "a.b" })).outcome).toBe("invalid_input");
    expect((await world.clientFor("t2").runEvents(run)).outcome).toBe("run_not_found");
    expect((await world.client.runEvents(runIdFor("t1", startKey("events-test", "never")))).outcome).toBe("run_not_found");
    // Caught up: no event after the last, and the same cursor back.
    const all = await stored(run);
    const last = all.at(-1)!.id!;
    expect(await world.client.runEvents(run, { after: last })).toEqual({ outcome: "events", events: [], last, more: false });
  });

  it("runway run watch prints a finished run's history from its journal and exits 0; an unknown run exits 1", async () => {
    await publishDefinition({ name: "events-one", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
    const run = await start("events-one", {}, "watch");
    await settled(world.client, run);
    const args = (id: string) => ["run", "watch", id, "--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--tenant", "t1"];
    const watch = spawnTsx(cli, args(run), { name: "runway run watch" });
    const exit = await watch.exited;
    expect(exit.code, watch.lines.join("\n")).toBe(0);
    const out = watch.lines.join("\n");
    expect(out).toMatch(/run_started/);
    expect(out).toMatch(/step_succeeded\s+a/);
    expect(out).toMatch(/run_succeeded/);
    const missing = spawnTsx(cli, args(runIdFor("t1", startKey("events-test", "nope"))), { name: "runway run watch (missing)" });
    expect((await missing.exited).code, missing.lines.join("\n")).toBe(1);
    expect(missing.lines.join("\n")).toMatch(/run_not_found/);
  });
});
