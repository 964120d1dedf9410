/**
 * approvals: 10,000 runs parked on an approval node, on one in-process node (its heap after a full
 * collection before and after parking: what a parked run costs in memory; the workers and
 * scheduler slots they hold, which must be none); then 1,000 of them approved at once through
 * `approvals.decide`, each run going on to one no-op step: time from the decisions sent until all
 * 1,000 runs succeeded. Then, beside it, the same for 1,000 runs of a definition that is the
 * approval node alone (each run ends when it is approved), parked after the first 1,000 ended
 * (with the 9,000 others still parked): the decision's own cost, without the step's.
 *
 * The bench tenant's run cap is the ceiling, 10,000 (`world()`): a parked run still counts as one
 * of the tenant's active runs (it is one until the run ends), so a run past the cap would be
 * queued, not parked (the bench fails on one). Env: APPROVALS_PARKED (default 10,000),
 * APPROVALS_DECIDED (default 1,000, also the approval-alone runs), BENCH_CPU_PROFILE (a file: a
 * CPU profile of this process over the first decision phase, or the approval-alone one with
 * BENCH_PROFILE_PHASE=alone, as `node --cpu-prof` writes them), BENCH_HEAP_PROFILE (a file: an
 * allocation sampling profile of the same phase, collected objects included; needs BENCH_CPU_PROFILE).
 */
import { ApiFault } from "../../cluster/client.js";
import { waitFor } from "../harness/index.js";
import { clockTicks, cpuMicrosEach, cpuProfile, heapUsedMb, percentiles, procCpuSeconds, progress, windowed } from "./stats.js";
import { perStep, syscalls, world } from "./workflow.js";

const TARGET = { heap_delta_mb_max: 50, decided_all_done_ms_max: 1_000 };
const WARM_UP = 50;

const mb = (x: number) => Math.round(x * 10) / 10;

export async function approvals(): Promise<Record<string, unknown>> {
  const parked = Number(process.env.APPROVALS_PARKED ?? 10_000);
  const decided = Number(process.env.APPROVALS_DECIDED ?? 1_000);
  const w = await world();
  try {
    const gate = { id: "gate", kind: "approval", prompt: "Go on?", payload: { n: "${input.n}" }, group: "bench", timeout_ms: 3_600_000 };
    await w.client.putDefinition({ name: "gated", nodes: [gate, { id: "after", kind: "code", needs: ["gate"], handler: "noop" }] });
    await w.client.putDefinition({ name: "gate-only", nodes: [gate] });
    // Approval requests are events: counting them tells when every run is parked.
    const requested = new Set<string>();
    w.nc.subscribe("rw.evt.bench.*.*.approval_requested", { callback: (_e, msg) => void requested.add(msg.subject.split(".")[4]!) });
    await w.nc.flush();
    const start = async (n: number, definition = "gated"): Promise<string> => {
      const a = await w.client.startRun({ definition, input: { n } });
      if (a.outcome !== "started" || (a.run as { status: string }).status === "queued") throw new Error(`start: ${JSON.stringify(a)}`);
      return (a.run as { id: string }).id;
    };
    let retried = 0;
    // A 503 says "retry" (the API's contract); a retry may find its first try applied after all.
    const approve = async (id: string): Promise<void> => {
      for (let tries = 1; ; tries++) {
        try {
          const d = await w.client.decide(`${id}:gate`, "approve", { by: "bench" });
          if (d.outcome === "decided" || (tries > 1 && d.outcome === "already_decided")) return;
          throw new Error(`decide ${id}: ${JSON.stringify(d)}`);
        } catch (err) {
          if (!(err instanceof ApiFault && err.code === 503) || tries === 5) throw err;
          retried++;
        }
      }
    };

    progress(`approvals: warm-up, ${WARM_UP} runs parked and approved`);
    const warm: string[] = [];
    await windowed(WARM_UP, 16, async (i) => void warm.push(await start(i)));
    await waitFor(() => warm.every((id) => requested.has(id)) || undefined, { timeoutMs: 60_000, describe: "the warm-up runs to park" });
    await Promise.all(warm.map(async (id) => (await approve(id), w.finished(id))));

    const before = heapUsedMb();
    const rssBefore = process.memoryUsage().rss / 1024 / 1024;
    progress(`approvals: parking ${parked} runs, 64 starts in flight`);
    const ids: string[] = [];
    const t0 = performance.now();
    await windowed(parked, 64, async (i) => {
      ids.push(await start(i));
      if (ids.length % 1_000 === 0) progress(`approvals: ${ids.length} started, ${requested.size - WARM_UP} parked`);
    });
    const startedS = (performance.now() - t0) / 1000;
    await waitFor(() => ids.every((id) => requested.has(id)) || undefined, { timeoutMs: 120_000, intervalMs: 100, describe: "every run to park" });
    const parkedS = (performance.now() - t0) / 1000;
    const last = (await w.client.getRun(ids[ids.length - 1]!)).run as { status: string; waiting: { on: string } | null };
    if (last.status !== "waiting" || last.waiting?.on !== "approval") throw new Error(`the last run is not parked: ${JSON.stringify(last)}`);
    progress(`approvals: all parked; heap, workers, scheduler, tenant`);
    const after = heapUsedMb();
    const rssAfter = process.memoryUsage().rss / 1024 / 1024;
    const scheduler = w.node.dispatcher?.metrics(Date.now());
    const held = { workers: w.node.executor.inFlight, scheduler_running: scheduler?.running ?? 0, scheduler_queued: scheduler?.queued ?? 0 };
    const tenant = (await w.client.getTenant()).tenant as { active_runs: number; queued_runs: number };

    /** Approves `chosen` at once: time until every decision was answered, and until every run succeeded. */
    const approveAll = async (chosen: string[], profiled: boolean) => {
      const done = chosen.map((id) => w.finished(id));
      const answers: number[] = [];
      const profile = profiled ? await cpuProfile() : undefined;
      const ticks = clockTicks();
      const serverCpu0 = procCpuSeconds(w.server.pid, ticks);
      const cpu0 = process.cpuUsage();
      const main0 = procCpuSeconds(process.pid, ticks, process.pid);
      const io0 = syscalls(process.pid);
      const elu0 = performance.eventLoopUtilization();
      const t1 = performance.now();
      await Promise.all(
        chosen.map(async (id) => {
          const s = performance.now();
          await approve(id);
          answers.push(performance.now() - s);
        }),
      );
      const decidedMs = performance.now() - t1;
      const outcomes = await Promise.all(done);
      const allDoneMs = performance.now() - t1;
      const elu = performance.eventLoopUtilization(elu0);
      const cpu = process.cpuUsage(cpu0);
      const main1 = procCpuSeconds(process.pid, ticks, process.pid);
      const io1 = syscalls(process.pid);
      const serverCpu1 = procCpuSeconds(w.server.pid, ticks);
      await profile?.();
      const failed = outcomes.filter((o) => o !== "run_succeeded").length;
      if (failed > 0) throw new Error(`${failed} approved runs did not succeed`);
      return {
        decisions_answered_ms: Math.round(decidedMs),
        decide_answer_ms: percentiles(answers),
        decided_all_done_ms: Math.round(allDoneMs),
        // CPU per approved run in microseconds: this process (the node, its pool threads, the bench client) and nats-server.
        cpu_us_per_run: {
          process: Math.round((cpu.user + cpu.system) / chosen.length),
          // The node's main thread alone (the event loop every actor, the scheduler and the client share): what bounds the phase.
          main_thread: cpuMicrosEach(main0, main1, chosen.length),
          nats_server: cpuMicrosEach(serverCpu0, serverCpu1, chosen.length),
        },
        // Read and write syscalls of this process per approved run (/proc/<pid>/io): socket reads and writes, thread wake-ups.
        syscalls_per_run: perStep(io0, io1, chosen.length),
        // Share of the phase the node's event loop (its main thread) was busy: near 1, the phase is CPU-bound there.
        main_thread_busy: Math.round(elu.utilization * 100) / 100,
      };
    };

    progress(`approvals: approving ${decided} at once (approval, then a no-op step)`);
    const profileAlone = process.env.BENCH_PROFILE_PHASE === "alone";
    const withStep = await approveAll(ids.slice(0, decided), !profileAlone);

    progress(`approvals: parking ${decided} runs of the approval alone, then approving them at once`);
    const alone: string[] = [];
    await windowed(decided, 64, async (i) => void alone.push(await start(parked + i, "gate-only")));
    await waitFor(() => alone.every((id) => requested.has(id)) || undefined, {
      timeoutMs: 120_000,
      intervalMs: 100,
      describe: "the approval-alone runs to park",
    });
    const gateOnly = await approveAll(alone, profileAlone);

    const delta = after - before;
    return {
      bench: "approvals",
      parked,
      start_s: Math.round(startedS * 10) / 10,
      all_parked_s: Math.round(parkedS * 10) / 10,
      heap_before_mb: mb(before),
      heap_after_parking_mb: mb(after),
      heap_delta_mb: mb(delta),
      heap_per_parked_run_kb: Math.round((delta * 1024) / parked),
      rss_delta_mb: mb(rssAfter - rssBefore),
      held_while_parked: held,
      tenant_active_runs: tenant.active_runs,
      tenant_queued_runs: tenant.queued_runs,
      decided,
      ...withStep,
      approval_alone: gateOnly,
      decide_retries_after_503: retried,
      target: TARGET,
      heap_target_met: delta < TARGET.heap_delta_mb_max,
      decided_target_met: withStep.decided_all_done_ms <= TARGET.decided_all_done_ms_max,
      target_met: delta < TARGET.heap_delta_mb_max && withStep.decided_all_done_ms <= TARGET.decided_all_done_ms_max,
    };
  } finally {
    await w.close();
  }
}
