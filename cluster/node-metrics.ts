import type { Dispatcher, StepExecutor } from "../actors/index.js";
import type { RunwayNode, StepPool } from "../runtime/index.js";

type Metric = { name: string; help: string; type: "counter" | "gauge"; value: number; labels?: Record<string, string> };
const metric =
  (type: Metric["type"]) =>
  (name: string, help: string, value: number, labels?: Record<string, string>): Metric => ({ name, help, type, value, ...(labels ? { labels } : {}) });
const c = metric("counter");
const g = metric("gauge");

/**
 * What a workflow node reports on its metrics endpoint beside the machines' own counters: the
 * actor host's, the executor's and the pool's counts, and the fair scheduler's queue and service.
 */
export function collectNodeMetrics(node: RunwayNode, executor: StepExecutor, pool: StepPool): Metric[] {
  const h = node.host.stats;
  const e = executor.stats;
  const p = pool.stats();
  return [
    c("actor_transitions", "actor transitions stored", h.transitions),
    c("actor_writes", "fenced actor writes", h.writes),
    c("actor_revision_conflicts", "writes refused because the partition moved on (reload and decide again)", h.stale),
    c("partition_fenced_writes", "writes refused under an old partition epoch (zombie rejections at the partition)", h.fenced),
    c("commands_duplicate", "redelivered commands answered without applying them again", h.duplicates),
    c("commands_terminated", "commands given up without being applied (malformed, refused by the event schema, dead-lettered)", h.terminated),
    ...node.host.deadLetters.stats().map((d) =>
      c("dead_letters", "commands and effects filed in RUNWAY_DLQ instead of being applied or published, by actor kind and reason", d.count, {
        kind: d.kind,
        reason: d.reason,
      }),
    ),
    c("lease_acquisitions", "attempts leased and started on this node", e.started),
    c("zombie_commit_rejections", "step reports refused because their lease or cancellation epoch was no longer current", e.staleCommits),
    c("stale_cancel_commits", "step reports refused because their run (or its tree) was cancelled after the attempt began", e.staleCancelCommits),
    c("stale_partition_commits", "step reports this node could not store because its partition epoch was stale (forwarded to the owner)", e.partitionFenced),
    c("heartbeats", "lease renewals sent", e.heartbeats),
    c("reports_via_mailbox", "step reports sent through the durable mailbox (partition not served here)", e.viaMailbox),
    c("handler_timeouts", "handlers stopped at their timeout", p.timeouts),
    g("attempts_in_flight", "attempts executing on this node", executor.inFlight),
    g("partitions_owned", "partitions this node serves", node.host.ownedPartitions().length),
    g(
      "actors_in_memory",
      "actors this node holds in memory (live runs and tenants; an ended run leaves once its last write is out)",
      node.host.actorsInMemory(),
    ),
    c("events_published", "progress events published live (each is also in its run's journal)", node.host.events.stats.published),
    c(
      "events_dropped",
      "progress events not published live (larger than the server's max payload, or the connection closed); the journal keeps them",
      node.host.events.stats.dropped,
    ),
  ];
}

export function collectSchedulerMetrics(dispatcher: Dispatcher | undefined, now: number): Metric[] {
  if (!dispatcher) return [];
  const m = dispatcher.metrics(now);
  const out: Metric[] = [
    c("scheduler_leases", "worker slots granted by the fair scheduler", m.leases),
    c("scheduler_starvation_events", "leases of tickets that had waited past the starvation threshold", m.starvation_events),
    g("scheduler_queued", "ready attempts waiting for a slot", m.queued),
  ];
  for (const [tenant, classes] of Object.entries(m.queued_by_tenant_class))
    for (const [cls, n] of Object.entries(classes))
      if (n > 0) out.push(g("scheduler_queued_by_tenant_class", "ready attempts waiting, by tenant and class", n, { tenant, class: cls }));
  for (const sv of dispatcher.service()) {
    const labels = { tenant: sv.tenant, class: sv.class };
    out.push(g("scheduler_mean_wait_ms", "mean queue wait of the attempts served, by tenant and class", Math.round(sv.mean_wait_ms * 10) / 10, labels));
    out.push(
      g(
        "scheduler_mean_slowdown",
        "mean (queue wait + run time) / run time of the attempts served, by tenant and class",
        Math.round(sv.mean_slowdown * 100) / 100,
        labels,
      ),
    );
  }
  for (const [tenant, classes] of Object.entries(m.oldest_wait_ms_by_tenant_class))
    for (const [cls, ms] of Object.entries(classes))
      out.push(g("scheduler_queue_age_ms", "wait of the oldest queued attempt, by tenant and class", ms ?? 0, { tenant, class: cls }));
  return out;
}

/** Starts admitted early (gateways/api/early-admission.ts), the recovery sweep's passes, the live-run index's listings of member keys, and the run memories held. */
export function collectRunMetrics(
  early: { admittedEarly: number; givenBack: number },
  sweep: { passes: number; errors: number },
  memberListings: number,
  memoriesHeld: number,
): Metric[] {
  return [
    g("run_memories_held", "runs whose input and outputs this node holds in memory (its live runs; an ended run's leave with it)", memoriesHeld),
    c(
      "starts_admitted_early",
      "starts admitted on the definition version this node last resolved while it read the latest (one round trip less)",
      early.admittedEarly,
    ),
    c(
      "early_admissions_given_back",
      "early admissions given back (the latest version had another cost ceiling or admission policy, or the start was refused)",
      early.givenBack,
    ),
    c("sweep_passes", "recovery sweep passes made", sweep.passes),
    c("sweep_errors", "records a sweep pass could not read or repair (skipped)", sweep.errors),
    c(
      "live_index_member_listings",
      "listings of the tenants' member keys (every counted run of the cluster) made by recovery and sweep passes",
      memberListings,
    ),
  ];
}
