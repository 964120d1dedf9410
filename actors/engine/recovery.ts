import type { NatsConnection } from "@nats-io/transport-node";
import { HANDED_OVER, isTerminal, type RunContext } from "../../machines/index.js";
import {
  decodeActor,
  isRemoval,
  kvSubject,
  migratedSnapshot,
  publish,
  readLast,
  type ActorHost,
  type ActorRecord,
  type Logger,
  type PartitionLog,
} from "../../runtime/index.js";
import { everyRun, LIVE_BUCKET, type LiveRunIndex, createdSubject, endedSubject, summaryOf, RUN_KIND, RUN_RECORD, type RunMemories } from "../run/index.js";
import { actorIdsIn } from "../records/index.js";

/**
 * The streams' duplicate window: an outbox published again within it is dropped by the stream,
 * so a recently ended run's last outbox can be republished without a second delivery.
 */
export const REPUBLISH_WINDOW_MS = 120_000;

type StoredRun =
  | { outcome: "live" | "ended"; run: RunContext | null; outbox: number }
  /** Not answered (a timeout, a leader being elected): worth reading again. */
  | { outcome: "unavailable"; detail: string }
  | { outcome: "missing" | "undecodable" };

/** The store a partition's runs are read from: its fenced log, or a decorator of it (tests). */
export type RecoveryLog = Pick<PartitionLog, "read" | "epoch"> & Partial<Pick<PartitionLog, "fromRelease" | "settled">>;

async function readRun(log: RecoveryLog, id: string): Promise<StoredRun> {
  const read = decodeActor(RUN_RECORD, await log.read(`${RUN_KIND}.${id}`));
  if (read.outcome === "found") return storedRunOf(read.snapshot.context?.run ?? null, read.record);
  if (read.outcome === "corrupt") return { outcome: "undecodable" };
  return read;
}

/** A run as its record holds it (in today's format): live until its status is terminal. */
function storedRunOf(run: RunContext | null, record: ActorRecord): StoredRun {
  return { outcome: run && !isTerminal(run.lifecycle.status) ? "live" : "ended", run, outbox: record.outbox.length };
}

/**
 * A listed run as recovery sees it, from its journal read once (its facts stay in memory for the
 * `run.recover` that follows). A replica behind the leader may answer: an older record is never a
 * wrong answer here (a run that looks live refuses what does not fit), and a missing one is read from
 * the leader.
 */
async function recalledRun(log: RecoveryLog, id: string, memories: Pick<RunMemories, "recall"> | undefined): Promise<StoredRun> {
  const recalled = await memories?.recall(id);
  const last = recalled?.outcome === "read" ? recalled.last : undefined;
  return last ? storedRunOf(migratedSnapshot(RUN_RECORD, last).context?.run ?? null, last) : readRun(log, id);
}

/** Where a recovery pass is (for the log line of a slow one): building the index, listing the partition's runs, or settling them. */
export interface RecoveryProgress {
  stage: "index" | "listing" | "settling";
  listed?: number;
  settled?: number;
}

/** What recovering a partition did with the runs the live-run index listed. */
export interface RecoveryReport {
  /** Runs whose lost attempts were failed and retried. */
  recovered: number;
  /** Runs read and left as they were: nothing of theirs was lost, or they had ended (their last outbox published again, or their index entry removed). */
  unchanged: number;
  /** Listed runs with no record (a create in flight, or one refused) or one that does not decode: the sweep's and the dead-letter stream's. */
  skipped: number;
  /** Runs not settled: their record was not read, or their command was not applied (a store fault). {@link recoverPartitionPatiently} tries them again. */
  unsettled: string[];
  /** Live runs whose `run.recover` found the partition no longer served here (handed over meanwhile): its next owner's recovery is theirs. */
  handedOver: string[];
  /** ms the pass took to list the partition's runs (the live-run index and the tenants' member keys), and in all. */
  listMs: number;
  ms: number;
}

type RecoveryDeps = {
  nc: NatsConnection;
  host: ActorHost;
  logger: Logger;
  live: LiveRunIndex;
  /** Where the runs' facts are kept: recovery reads each live run's journal once, for both (see recalledRun). */
  memories?: Pick<RunMemories, "recall">;
  now(): number;
};

type Settled = "recovered" | "unchanged" | "skipped" | "unsettled" | "not_served";

/** How a `run.recover` answered: applied or refused (nothing lost) settle the run; a command kept or refused for a store fault does not. */
function settledBy(answer: Awaited<ReturnType<ActorHost["dispatch"]>>, applied: "recovered" | "unchanged"): Settled {
  switch (answer.outcome) {
    case "applied":
      return applied;
    case "refused":
    case "duplicate":
      return "unchanged";
    case "not_served":
      return "not_served";
    case "kept":
      return "unsettled";
    case "invalid_input":
      return answer.reason === "unavailable" ? "unsettled" : "skipped";
    case "unknown_kind":
      return "skipped";
  }
}

/**
 * When this node starts serving a partition, the attempts its runs leased lived in the previous
 * owner's memory: every live run (from the live-run index, so the cost follows live runs) gets
 * `run.recover`, which fails them `worker_lost` and retries. Recently ended runs are touched too, so
 * loading them republishes an outbox a crash cut short. A run the store did not answer for is
 * reported `unsettled`, never passed over; `only` limits a pass to those.
 */
export async function recoverPartition(
  deps: RecoveryDeps,
  partition: number,
  log: RecoveryLog,
  only?: ReadonlySet<string>,
  progress: RecoveryProgress = { stage: "index" },
): Promise<RecoveryReport> {
  const began = performance.now();
  progress.stage = "index";
  if (!only) await buildLiveIndex(deps, partition, log);
  progress.stage = "listing";
  const entries = await deps.live.entries(partition);
  const report: RecoveryReport = {
    recovered: 0,
    unchanged: 0,
    skipped: 0,
    unsettled: [],
    handedOver: [],
    listMs: Math.round(performance.now() - began),
    ms: 0,
  };
  const keyed = new Set(entries.indexed);
  const commandId = (id: string) => `recover/${partition}/${log.epoch}/${id}`;
  // Taken from a live owner that let it go: what that owner still executes reports here (see `onRecover`).
  const reason = log.fromRelease ? HANDED_OVER : "partition_claimed";
  const settle = async (id: string): Promise<Settled> => {
    const stored = await recalledRun(log, id, deps.memories);
    if (stored.outcome === "unavailable") return "unsettled";
    // No record (yet): a create in flight, or one refused; the sweep removes a lasting one.
    if (stored.outcome === "missing" || stored.outcome === "undecodable") return "skipped";
    if (stored.outcome === "ended") {
      const ended = stored.run?.lifecycle.ended_at;
      if (stored.outbox > 0 && ended != null && deps.now() - ended <= REPUBLISH_WINDOW_MS)
        return settledBy(await deps.host.dispatch({ kind: RUN_KIND, id }, { type: "run.recover", reason }, commandId(id)), "unchanged");
      if (keyed.has(id)) await deps.live.remove(id);
      return "unchanged";
    }
    // Which attempts this process still holds (a run it served since the claim, or before a lease it
    // let lapse) is read by the run actor as it decides the command, not here: the run may move first.
    const answer = await deps.host.dispatch({ kind: RUN_KIND, id }, { type: "run.recover", reason }, commandId(id));
    const settled = settledBy(answer, "recovered");
    if (settled !== "recovered") deps.logger.debug("live run not recovered", { partition, run: id, settled, answer });
    return settled;
  };
  const runs = everyRun(entries).filter((id) => !only || only.has(id));
  Object.assign(progress, { stage: "settling", listed: runs.length, settled: 0 });
  await Promise.all(
    runs.map(async (id) => {
      const settled = await settle(id);
      progress.settled = (progress.settled ?? 0) + 1;
      if (settled === "unsettled") report.unsettled.push(id);
      else if (settled === "not_served") report.handedOver.push(id);
      else report[settled]++;
    }),
  );
  report.ms = Math.round(performance.now() - began);
  // Unsettled runs are the caller's to log (recoverPartitionPatiently warns as it tries them again).
  if (report.recovered > 0) deps.logger.info("recovered in-flight attempts", { partition, runs: report.recovered, listMs: report.listMs, ms: report.ms });
  // Cut short: a hand-over while the pass listed or read (a restarted node taking its partitions back).
  // Nothing is lost (the next owner recovers them at its claim), but those runs wait for that claim.
  if (report.handedOver.length > 0)
    deps.logger.warn("recovery cut short: the partition was handed over before these runs were recovered", {
      partition,
      runs: report.handedOver.slice(0, 5),
      count: report.handedOver.length,
      listMs: report.listMs,
      ms: report.ms,
    });
  deps.logger.debug("partition recovery pass", {
    partition,
    listed: runs.length,
    recovered: report.recovered,
    unchanged: report.unchanged,
    skipped: report.skipped,
    unsettled: report.unsettled.length,
    handedOver: report.handedOver.length,
    listMs: report.listMs,
    ms: report.ms,
  });
  return report;
}

/**
 * {@link recoverPartition}, tried again with backoff while it fails or leaves runs unsettled and the
 * partition is still served by `log`; later tries take only the unsettled runs. Each try is
 * idempotent (a run with nothing in flight refuses `run.recover` without a write). After the last
 * try the failure is the caller's.
 */
export async function recoverPartitionPatiently<L extends RecoveryLog>(
  deps: RecoveryDeps & { serving(partition: number, log: L): boolean; sleep?(ms: number): Promise<void> },
  partition: number,
  log: L,
): Promise<number> {
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  // A recovery still under way after this long holds up the runs whose attempts died with the last
  // owner (a short attempt has no lease timer: this recovery is what fails it): say so, once.
  const began = performance.now();
  const progress: RecoveryProgress = { stage: "index" };
  let warned = false;
  const slow = setTimeout(() => {
    warned = true;
    deps.logger.warn("recovery not done yet", { partition, ms: Math.round(performance.now() - began), ...progress });
  }, SLOW_RECOVERY_MS);
  slow.unref?.();
  let outcome = "failed";
  try {
    const recovered = await recoverUntilSettled(deps, partition, log, sleep, progress);
    outcome = `${recovered} recovered`;
    return recovered;
  } finally {
    clearTimeout(slow);
    if (warned) deps.logger.info("slow recovery done", { partition, ms: Math.round(performance.now() - began), outcome, ...progress });
  }
}

/** A recovery taking longer than this is logged (`recovery not done yet`): the runs it has not reached yet wait for it. */
const SLOW_RECOVERY_MS = 2_000;

async function recoverUntilSettled<L extends RecoveryLog>(
  deps: RecoveryDeps & { serving(partition: number, log: L): boolean },
  partition: number,
  log: L,
  sleep: (ms: number) => Promise<void>,
  progress: RecoveryProgress,
): Promise<number> {
  let recovered = 0;
  let cutShort = false;
  let only: ReadonlySet<string> | undefined;
  for (let attempt = 1, delay = 100; ; attempt++, delay = Math.min(delay * 2, 2_000)) {
    let failure: unknown;
    try {
      const report = await recoverPartition(deps, partition, log, only, progress);
      recovered += report.recovered;
      cutShort ||= report.handedOver.length > 0;
      if (report.unsettled.length === 0) {
        // Every run reached: what a dead owner left is settled, and a release now says so (a
        // pass cut short leaves it to the next owner, which must treat it as a takeover).
        if (!cutShort) log.settled = true;
        return recovered;
      }
      only = new Set(report.unsettled);
      failure = new Error(`${report.unsettled.length} runs unsettled (${report.unsettled.slice(0, 5).join(", ")})`);
    } catch (err) {
      failure = err;
    }
    if (attempt >= 8 || !deps.serving(partition, log)) throw failure;
    deps.logger.warn("recovery incomplete, trying again", { partition, attempt, error: String(failure) });
    await sleep(delay);
    if (!deps.serving(partition, log)) return recovered;
  }
}

/** Marks a partition whose stored runs are all in the live-run index and the runs index. */
const builtKey = (partition: number) => `built.p${partition}`;

/**
 * Runs stored before the live-run index have no entry in it: the first owner of each partition reads
 * every run record once, indexes the live ones, and marks the partition built. Every step is
 * idempotent, so a node dying half way leaves no mark and the next try does it again.
 */
export async function buildLiveIndex(deps: { nc: NatsConnection; live: LiveRunIndex; logger: Logger }, partition: number, log: RecoveryLog): Promise<void> {
  const { nc } = deps;
  if (await readLiveMark(nc, partition)) return;
  let indexed = 0;
  for (const id of await actorIdsIn(nc, partition, RUN_KIND)) {
    const stored = await readRun(log, id);
    // Marked built with a live run left out, the partition would never recover that run: no mark yet, try again.
    if (stored.outcome === "unavailable") throw new Error(`live index of partition ${partition}: run ${id} not read (${stored.detail})`);
    if (stored.outcome !== "live" && stored.outcome !== "ended") continue;
    const run = stored.run;
    if (!run) continue;
    if (stored.outcome === "live") await deps.live.add(id, { tenant: run.tenant, at: run.created_at });
    const data = new TextEncoder().encode(JSON.stringify(summaryOf(run)));
    await publish(nc, createdSubject(run.tenant, id), data, { msgId: `index-built/${id}/c` });
    if (stored.outcome === "ended") await publish(nc, endedSubject(run.tenant, id), data, { msgId: `index-built/${id}/e` });
    indexed++;
  }
  const done = await publish(nc, kvSubject(LIVE_BUCKET, builtKey(partition)), new TextEncoder().encode(JSON.stringify({ at: Date.now(), runs: indexed })));
  if (done.outcome !== "stored") throw new Error(`live index of partition ${partition}: mark not stored (${done.outcome})`);
  if (indexed > 0) deps.logger.info("indexed runs stored before the live-run index", { partition, runs: indexed });
}

async function readLiveMark(nc: NatsConnection, partition: number): Promise<boolean> {
  const read = await readLast(nc, `KV_${LIVE_BUCKET}`, kvSubject(LIVE_BUCKET, builtKey(partition)));
  if (read.outcome === "unavailable") throw new Error(`live index of partition ${partition}: ${read.detail}`);
  if (read.outcome === "missing") return false;
  return !isRemoval(read.message);
}
