import { readFileSync, mkdtempSync, existsSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { RunwayClient } from "../../cluster/client.js";
import { RUN_KIND } from "../../actors/index.js";
import { RUN_RECORD } from "../../actors/run/actor.js";
import { readActor } from "../../runtime/index.js";
import { startServer, waitFor, type ChildHandle } from "../harness/index.js";
import { cpuProfile, heapUsedMb, progress, v8Trace, windowed } from "./stats.js";
import { world } from "./workflow.js";
import { startNodeProcess } from "./cluster.js";

/**
 * w4: 10,000 runs parked on a one-hour sleep (the node's heap before and after: what a parked
 * run costs in memory; no worker is held), then 1,000 of them woken at once (their sleep timers
 * fired as the server's schedules would) and each runs one step: time until all 1,000 are done.
 */
export async function w4(): Promise<Record<string, unknown>> {
  const w = await world();
  try {
    await w.client.putDefinition({
      name: "nap",
      nodes: [
        { id: "nap", kind: "sleep", duration_ms: 3_600_000 },
        { id: "after", kind: "code", needs: ["nap"], handler: "noop" },
      ],
    });
    const parked = Number(process.env.W4_PARKED ?? 10_000);
    const woken = Number(process.env.W4_WOKEN ?? 1_000);
    const before = heapUsedMb();
    const ids: string[] = [];
    progress(`w4: parking ${parked} runs`);
    await windowed(parked, 64, async () => {
      const a = await w.client.startRun({ definition: "nap" });
      if (a.outcome !== "started") throw new Error(a.outcome);
      ids.push((a.run as { id: string }).id);
    });
    await waitFor(
      async () =>
        ((await w.client.getRun(ids[ids.length - 1]!)).run && ((await w.client.getRun(ids[ids.length - 1]!)).run as { status: string }).status === "waiting") ||
        undefined,
      { timeoutMs: 60_000, describe: "the last run parked" },
    );
    const after = heapUsedMb();
    const busy = w.node.executor.inFlight;
    progress(`w4: waking ${woken}`);
    const chosen = ids.slice(0, woken);
    const done = chosen.map((id) => w.finished(id));
    const profiled = await cpuProfile();
    const traced = v8Trace();
    const t0 = performance.now();
    await Promise.all(chosen.map((id) => w.node.node.host.dispatch({ kind: RUN_KIND, id }, { type: "timer.fired", kind: "sleep", node: "nap" }, `wake/${id}`)));
    await Promise.all(done);
    const wakeMs = performance.now() - t0;
    traced?.();
    await profiled?.();
    return {
      bench: "w4",
      parked,
      heap_before_mb: Math.round(before),
      heap_after_parking_mb: Math.round(after),
      heap_delta_mb: Math.round((after - before) * 10) / 10,
      workers_held_while_parked: busy,
      woken,
      woken_all_done_ms: Math.round(wakeMs),
    };
  } finally {
    await w.close();
  }
}

function startNode(server: string, ledger: string): Promise<ChildHandle> {
  return startNodeProcess(server, "w5-node", { args: ["--lease-ttl-ms", "3000"], env: { W5_LEDGER: ledger } });
}

/**
 * w5: the node is SIGKILLed while w1's workload runs (200 runs × 10 sequential steps, no-op by
 * default, all started at once, the node's 16 worker slots running them), then started again
 * with the `runway` command: time from the restart until every run is done, steps committed
 * before the kill that ran again (must be 0), and attempts in flight at the kill that ran twice.
 * Every run is started before any step runs (the first steps wait for a gate file the bench
 * writes once the 200 starts are answered), and the kill comes once a quarter of the steps ran,
 * so it lands with three quarters of the work still to do, whatever the speed of this machine.
 * Each step appends to a ledger; `W5_STEP_MS` makes each also take that long.
 */
export async function w5(): Promise<Record<string, unknown>> {
  const STEP_MS = Number(process.env.W5_STEP_MS ?? 0);
  const server = await startServer();
  const dir = mkdtempSync(join(tmpdir(), "runway-w5-"));
  const ledger = join(dir, "ledger.txt");
  const gate = join(dir, "go");
  let node = await startNode(server.url, ledger);
  const nc = await connect(server.connectOptions());
  try {
    const client = new RunwayClient(nc, "w5", 60_000);
    await client.createTenant("w5", { max_concurrency: 10_000 });
    await client.putDefinition({
      name: "seq10",
      nodes: Array.from({ length: 10 }, (_, i) => ({
        id: `s${i}`,
        kind: "code",
        handler: "count_slow",
        input: { file: ledger, value: i, ms: STEP_MS, ...(i === 0 ? { gate } : {}) },
        ...(i > 0 ? { needs: [`s${i - 1}`] } : {}),
      })),
    });
    const runs: string[] = [];
    // Completions are seen as their events arrive; polling 200 runs every few ms would load the
    // very node whose recovery is being timed.
    const succeeded = new Set<string>();
    nc.subscribe("rw.evt.w5.*.*.run_succeeded", { callback: (_err, msg) => void succeeded.add(msg.subject.split(".")[4]!) });
    await nc.flush();
    progress("w5: 200 runs x 10 steps, then SIGKILL");
    await windowed(200, 200, async () => void runs.push(((await client.startRun({ definition: "seq10" })).run as { id: string }).id));
    writeFileSync(gate, "");
    await waitFor(() => (existsSync(ledger) ? readFileSync(ledger, "utf8").split("\n").length > 500 || undefined : undefined), {
      timeoutMs: 60_000,
      intervalMs: 2,
      describe: "a quarter of the steps to run",
    });
    // What each run had committed at the kill: its nodes that succeeded.
    await node.kill("SIGKILL");
    // Read from the store itself: the API went down with the node.
    const committed = new Set<string>();
    for (const id of runs) {
      const read = await readActor({ nc: nc, partitions: 32 }, RUN_RECORD, id);
      const nodes = read.outcome === "found" ? (read.snapshot.context?.run?.nodes ?? {}) : {};
      for (const [step, n] of Object.entries(nodes)) if (n.s === "succeeded") committed.add(`${id} ${step}`);
    }
    const ledgerBytesAtKill = readFileSync(ledger, "utf8").length;
    const t0 = performance.now();
    const wall0 = Date.now();
    node = await startNode(server.url, ledger);
    const restartedMs = performance.now() - t0;
    // When the first step after the restart ran (its ledger line): recovery, apart from the work.
    let firstStepMs: number | undefined;
    const firstStep = setInterval(() => {
      if (firstStepMs === undefined && readFileSync(ledger, "utf8").length > ledgerBytesAtKill) firstStepMs = performance.now() - t0;
    }, 2);
    // A run's live event may be lost with the node (it is not stored apart from the journal): a
    // run not heard of is also asked for: every 500 ms once at most 20 are left, every 2 s before.
    let asked = performance.now();
    await waitFor(
      async () => {
        const silent = runs.filter((id) => !succeeded.has(id));
        if (silent.length === 0) return true;
        const since = performance.now() - asked;
        if ((silent.length > 20 || since < 500) && since < 2_000) return undefined;
        asked = performance.now();
        for (const id of silent) if (((await client.getRun(id)).run as { status: string }).status === "succeeded") succeeded.add(id);
        return silent.every((id) => succeeded.has(id)) || undefined;
      },
      { timeoutMs: 120_000, intervalMs: 2, describe: "every run to finish after the restart" },
    );
    const doneMs = performance.now() - t0;
    clearInterval(firstStep);
    const per = new Map<string, string[]>();
    for (const line of readFileSync(ledger, "utf8").trim().split("\n")) {
      const [run, step, attempt] = line.split(" ");
      per.set(`${run} ${step}`, [...(per.get(`${run} ${step}`) ?? []), attempt!]);
    }
    let committedRerun = 0;
    for (const key of committed) if ((per.get(key)?.length ?? 0) > 1) committedRerun++;
    let inFlightTwice = 0;
    for (const [key, attempts] of per) if (!committed.has(key) && attempts.length > 1) inFlightTwice++;
    return {
      bench: "w5",
      runs: runs.length,
      step_ms: STEP_MS,
      steps_committed_at_kill: committed.size,
      node_restart_ms: Math.round(restartedMs),
      restart_to_all_done_ms: Math.round(doneMs),
      restart_to_all_done_after_ready_ms: Math.round(doneMs - restartedMs),
      restart_to_first_step_ms: firstStepMs === undefined ? null : Math.round(firstStepMs),
      // When the last step's handler wrote its ledger line: the work itself, apart from noticing the ends.
      restart_to_last_step_ms: Math.round(statSync(ledger).mtimeMs - wall0),
      committed_steps_run_again: committedRerun,
      in_flight_steps_run_twice: inFlightTwice,
    };
  } finally {
    await node.kill("SIGKILL").catch(() => undefined);
    await nc.close();
    await server.dispose();
  }
}
