import { answerOf, type ActorHost, type Dispatched, type Logger, type MailboxClient } from "../../runtime/index.js";
import type { RunTypes } from "../run/index.js";

/** How long a result the store would not take is sent again (see `report`). */
const REPORT_RETRY_MS = 20_000;

/** What became of a report (a result or a heartbeat) sent to its run. */
export type ReportOutcome = "committed" | "stale" | "mailbox";

/**
 * The executor's report path as a port: hands `event` (a `step.result` or `step.heartbeat`) with
 * command id `id` to the run at `address`. Tests decorate it (a lost report); production uses it as is.
 */
export type StepReport = (address: { kind: string; id: string }, event: Record<string, unknown>, id: string) => Promise<ReportOutcome>;

/** What the report path needs of the node. */
type ReportDeps = { host: ActorHost; mailbox: MailboxClient; logger: Logger };

/** The executor's counts the report path keeps. */
type ReportStats = { viaMailbox: number; staleCommits: number; staleCancelCommits: number; partitionFenced: number };

/** The report path of a node's attempts: straight to the run's lane here, or its mailbox (see {@link StepReport}). */
export function reportTo(deps: ReportDeps, stats: ReportStats): StepReport {
  return (address, event, id) => report(deps, stats, address, event, id);
}

/**
 * Hands a report to its run. A result neither the run's partition nor its mailbox would store (a
 * store fault: a stream's leader being elected, a full disk) is sent again, backing off to 2 s,
 * for up to about 20 s: it may carry a call's receipt, and lost, its step waits for its lease's
 * end and a person may have to settle the call. A heartbeat is not: the next one follows.
 */
async function report(
  deps: ReportDeps,
  stats: ReportStats,
  address: { kind: string; id: string },
  event: Record<string, unknown>,
  id: string,
): Promise<ReportOutcome> {
  for (let wait = 250, waited = 0; ; waited += wait, wait = Math.min(wait * 2, 2_000)) {
    const outcome = await reportOnce(deps, stats, address, event, id);
    if (outcome !== "undelivered") return outcome;
    if (event.type !== "step.result" || waited >= REPORT_RETRY_MS) {
      deps.logger.warn("report not delivered; the attempt will be recovered", { run: address.id, event: event.type });
      return "mailbox";
    }
    await new Promise((r) => setTimeout(r, wait));
  }
}

async function reportOnce(
  deps: ReportDeps,
  stats: ReportStats,
  address: { kind: string; id: string },
  event: Record<string, unknown>,
  id: string,
): Promise<ReportOutcome | "undelivered"> {
  // Built here from what the pool returned (its closed codes, plain JSON output): validated once, not again by the run.
  const local = answerOf<RunTypes, "step.result" | "step.heartbeat", Dispatched<unknown>>(await deps.host.dispatch(address, event, id, { trusted: true }));
  // Refused with a closed code: the attempt is no longer the current one (a newer lease:
  // stale_lease; the run or its tree was cancelled since the attempt began: stale_cancel_epoch).
  const code = local.outcome === "applied" ? local.value?.outcome : local.outcome === "refused" ? "stale_lease" : undefined;
  if (code === "stale_lease" || code === "stale_cancel_epoch") {
    stats.staleCommits++;
    if (code === "stale_cancel_epoch") stats.staleCancelCommits++;
    // A cancel fences every attempt it stops, so each cancelled attempt's late report lands here: expected, counted, not a warning.
    const fields = { run: address.id, event: event.type, node: event.node, attempt: event.attempt };
    if (code === "stale_cancel_epoch") deps.logger.debug(`commit refused: ${code}`, fields);
    else deps.logger.warn(`commit refused: ${code}`, fields);
    return "stale";
  }
  if (local.outcome === "kept" && local.reason === "fenced") {
    // This node's partition epoch is stale (the partition moved on): its write was refused at
    // the store. The partition's owner decides; it has recovered the attempt meanwhile.
    stats.partitionFenced++;
    deps.logger.warn("commit refused: stale_partition_epoch; forwarded to the partition's owner", {
      run: address.id,
      event: event.type,
      node: event.node,
      attempt: event.attempt,
    });
  }
  if (local.outcome === "not_served" || local.outcome === "kept") {
    stats.viaMailbox++;
    const sent = await deps.mailbox.send(address, event as { type: string }, id);
    return sent.outcome === "stored" ? "mailbox" : "undelivered";
  }
  return "committed";
}
