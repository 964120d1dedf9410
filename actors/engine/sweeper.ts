import type { NatsConnection } from "@nats-io/transport-node";
import { isTerminal, parentGone, sweepPlan, type RunContext, type SweepSettings } from "../../machines/index.js";
import { readActor, type ActorHost, type Clock, type Logger, type MailboxClient } from "../../runtime/index.js";
import { tenantOfRun, actorIdsIn } from "../records/index.js";
import { everyRun, type LiveRunIndex, type EndedRunCompaction, RUN_KIND, RUN_RECORD } from "../run/index.js";
import { TENANT_KIND } from "../tenant/index.js";

export interface SweepReport {
  at: number;
  /** Live-index entries (and their run records) read this pass. */
  scanned: number;
  /** Of those, runs not ended. */
  live: number;
  /** Repairs asked for, by kind (the run decides again under its own lock, so a run that moved meanwhile is left alone). */
  actions: Record<string, number>;
  /** Records that could not be read or decoded, or a command that could not be sent: counted and skipped. */
  errors: number;
  /** The pass stopped at its bound; the next pass goes on from there. */
  truncated: boolean;
}

/**
 * The recovery sweep (seed 004's reaper and wait sweep): a bounded periodic pass over the live runs
 * of the partitions served here, so it costs what is live. It repairs what a lost clock or hand-over
 * left by sending each run a command its own machine decides, and releases tenant slots held by runs
 * that never got a record. A bad record never aborts a pass; a pass resumes where the last stopped.
 */
export class Sweeper {
  private readonly cursor = new Map<number, string>();
  /** The partition the next pass starts with (where the last one stopped). */
  private resumeFrom = 0;
  /** Runs a tenant counts that had no record: when first seen so. */
  private readonly missingSince = new Map<string, number>();
  /** Live-index entries whose run had no record: when first seen so. */
  private readonly unindexedSince = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<SweepReport> | undefined;
  /** Passes made and records skipped for errors, for the node's metrics. */
  readonly totals = { passes: 0, errors: 0 };

  constructor(
    private readonly deps: {
      nc: NatsConnection;
      host: ActorHost;
      mailbox: MailboxClient;
      partitions: number;
      clock: Clock;
      logger: Logger;
      maxPerPass?: number;
      /** The live-run index: the runs a pass reads. */
      live: LiveRunIndex;
      /** The runs a tenant counts (admitted or queued): its member keys (see TenantService.members). */
      members(tenant: string): Promise<{ run: string; project: string }[]>;
      /** A run a tenant counts (admitted or queued) with no record this long, over two passes, is released (default 60 s); so is a live-index entry with no record. */
      orphanAfterMs?: number;
      onAction?(action: string, tenant: string): void;
      /** How old a lost lease or offer must be before it is repaired (default DEFAULT_SWEEP; the run actor must use the same). */
      settings?: SweepSettings;
      /** Tickets of a run the node's scheduler holds (queued or running): its offers that are not lost. */
      held?(run: string): string[];
      /** Ended runs past their retention, purged to their final summary (see run/compaction.ts). */
      compaction?: EndedRunCompaction;
    },
  ) {}

  /** Sweeps every `intervalMs` (a pass never overlaps the previous one). */
  start(intervalMs: number): void {
    this.timer = setInterval(() => void this.pass().catch((err) => this.deps.logger.error("sweep pass failed", { error: String(err) })), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** One pass at `at` (default: now). Concurrent calls share the pass in progress. */
  pass(at = this.deps.clock.now()): Promise<SweepReport> {
    this.running ??= this.sweep(at).finally(() => (this.running = undefined));
    return this.running;
  }

  private async sweep(at: number): Promise<SweepReport> {
    const report: SweepReport = { at, scanned: 0, live: 0, actions: {}, errors: 0, truncated: false };
    const budget = this.deps.maxPerPass ?? 5_000;
    // Start where the last pass stopped, so a bound smaller than the partitions' runs still reaches every run in turn.
    const owned = this.deps.host.ownedPartitions();
    const from = Math.max(
      0,
      owned.findIndex((p) => p >= this.resumeFrom),
    );
    const order = [...owned.slice(from), ...owned.slice(0, from)];
    this.resumeFrom = 0;
    // Every partition's runs at once: the runs tenants count are one listing of the whole cluster's member keys.
    let listed: Map<number, { indexed: string[]; counted: string[] }> | undefined;
    try {
      listed = await this.deps.live.entriesOf(order);
    } catch (err) {
      report.errors++;
      this.deps.logger.warn("sweep: cannot list runs", { error: String(err) });
    }
    for (const [p, entries] of listed ?? []) {
      if (report.scanned >= budget) {
        report.truncated = true;
        this.resumeFrom = p;
        break;
      }
      const keyed = new Set(entries.indexed);
      const keys = everyRun(entries).sort();
      const after = this.cursor.get(p);
      const todo = after === undefined ? keys : keys.filter((k) => k > after);
      const slice = todo.slice(0, budget - report.scanned);
      if (slice.length < todo.length) {
        report.truncated = true;
        this.cursor.set(p, slice[slice.length - 1]!);
        this.resumeFrom = p;
      } else {
        this.cursor.delete(p);
      }
      for (const key of slice) {
        report.scanned++;
        try {
          await this.sweepRun(key, keyed.has(key), at, report);
        } catch (err) {
          report.errors++;
          this.deps.logger.warn("sweep: run skipped", { partition: p, key, error: String(err) });
        }
      }
      if (report.truncated) break;
    }
    await this.sweepTenants(at, report, budget);
    try {
      const compacted = (await this.deps.compaction?.pass(at)) ?? 0;
      if (compacted > 0) report.actions.compact_ended = (report.actions.compact_ended ?? 0) + compacted;
    } catch (err) {
      report.errors++;
      this.deps.logger.warn("sweep: ended-run compaction failed", { error: String(err) });
    }
    this.totals.passes++;
    this.totals.errors += report.errors;
    return report;
  }

  /** `keyed`: the run has a key of its own in the live-run index (not only its tenant's member key). */
  private async sweepRun(id: string, keyed: boolean, at: number, report: SweepReport): Promise<void> {
    const read = await this.readRun(id);
    if (read.outcome === "unavailable") return;
    if (read.outcome === "missing" || !read.run || !read.live) {
      // An index key is a hint: one whose run ended is removed; one with no record for two
      // passes (a create that never landed) too. A member key is its tenant's (`sweepTenants`).
      if (!keyed) return;
      if (read.outcome === "found" && read.run) await this.unindex(id, "unindex_ended", report);
      else {
        const since = this.unindexedSince.get(id);
        if (since === undefined) this.unindexedSince.set(id, at);
        else if (at - since >= (this.deps.orphanAfterMs ?? 60_000)) await this.unindex(id, "unindex_missing", report);
      }
      return;
    }
    this.unindexedSince.delete(id);
    const run = read.run;
    report.live++;
    const count = (action: string) => {
      report.actions[action] = (report.actions[action] ?? 0) + 1;
      this.deps.onAction?.(action, run.tenant);
    };
    const held = this.deps.held?.(id) ?? [];
    const plan = sweepPlan(run, at, this.deps.settings, held);
    for (const a of plan) {
      if (a.action !== "recheck_admission") continue;
      const sent = await this.deps.mailbox.send({ kind: TENANT_KIND, id: a.tenant }, { type: "tenant.recheck", run_id: id }, `recheck/${id}/${at}`);
      if (sent.outcome !== "stored") throw new Error(`recheck of ${id} not stored: ${sent.outcome}`);
      count("recheck_admission");
    }
    if (plan.some((a) => a.action !== "recheck_admission")) {
      // The run decides again (and counts what it did): only a repair that still applies is written.
      await this.deps.host.dispatch({ kind: RUN_KIND, id }, { type: "run.sweep", at, held }, `sweep/${id}/${at}`);
      for (const a of plan) if (a.action !== "recheck_admission") report.actions[a.action] = (report.actions[a.action] ?? 0) + 1;
    }
    if (run.parent_run_id !== null) {
      const parentRead = await this.readRun(run.parent_run_id);
      if (parentRead.outcome === "unavailable") return;
      const parent = parentRead.outcome === "found" ? parentRead.run : null;
      if (parentGone(run, parent)) {
        const status = parent ? parent.lifecycle.status : "missing";
        await this.deps.host.dispatch({ kind: RUN_KIND, id }, { type: "run.parent_gone", parent_status: status }, `parent-gone/${id}`);
        report.actions.parent_gone = (report.actions.parent_gone ?? 0) + 1;
      }
    }
  }

  private async unindex(id: string, action: string, report: SweepReport): Promise<void> {
    await this.deps.live.remove(id);
    this.unindexedSince.delete(id);
    report.actions[action] = (report.actions[action] ?? 0) + 1;
    this.deps.onAction?.(action, tenantOfRun(id) ?? "");
  }

  /**
   * A tenant's slots: a run it counts (admitted or queued) whose record never appeared — the
   * start crashed between admission and create, and nobody retried — would hold its slot for
   * ever. One with no record on two passes at least `orphanAfterMs` apart is released
   * (`tenant.run_ended`); one that ended without the tenant hearing it is released again.
   */
  private async sweepTenants(at: number, report: SweepReport, budget: number): Promise<void> {
    const orphanAfter = this.deps.orphanAfterMs ?? 60_000;
    let checked = 0;
    for (const p of this.deps.host.ownedPartitions()) {
      try {
        for (const id of await actorIdsIn(this.deps.nc, p, TENANT_KIND)) {
          const tenant = { id };
          const counted = await this.deps.members(id);
          for (const { run: runId, project } of counted) {
            // Tenant slots have a bound of their own, so a partition full of runs never starves them.
            if (checked >= budget) {
              report.truncated = true;
              return;
            }
            checked++;
            const read = await this.readRun(runId);
            if (read.outcome === "unavailable") continue;
            const run = read.outcome === "found" ? read.run : null;
            let action: string | undefined;
            if (run === null) {
              const since = this.missingSince.get(runId);
              if (since === undefined) this.missingSince.set(runId, at);
              else if (at - since >= orphanAfter) action = "release_orphan_slot";
            } else {
              this.missingSince.delete(runId);
              // Ended a while ago and still counted: the tenant never heard (its answer is idempotent).
              if (isTerminal(run.lifecycle.status) && run.lifecycle.ended_at !== null && at - run.lifecycle.ended_at >= orphanAfter)
                action = "release_ended_slot";
            }
            if (!action) continue;
            const sent = await this.deps.mailbox.send(
              { kind: TENANT_KIND, id: tenant.id },
              { type: "tenant.run_ended", run_id: runId, project },
              `release/${runId}/${at}`,
            );
            if (sent.outcome !== "stored") throw new Error(`release of ${runId} not stored: ${sent.outcome}`);
            this.missingSince.delete(runId);
            report.actions[action] = (report.actions[action] ?? 0) + 1;
            this.deps.onAction?.(action, tenant.id);
          }
        }
      } catch (err) {
        report.errors++;
        this.deps.logger.warn("sweep: tenant slots skipped", { partition: p, error: String(err) });
      }
    }
  }

  /** A run's record: `found` with the run (null if the record holds none yet) and whether its actor is live; a corrupt one throws (counted by the pass). */
  private async readRun(
    id: string,
  ): Promise<{ outcome: "found"; run: RunContext | null; live: boolean } | { outcome: "missing" } | { outcome: "unavailable" }> {
    const read = await readActor(this.deps, RUN_RECORD, id);
    if (read.outcome === "corrupt") throw new Error(`undecodable record: ${read.detail}`);
    if (read.outcome === "unavailable") return { outcome: "unavailable" };
    if (read.outcome === "missing") return read;
    // In today's form: a head stored by an earlier version was migrated by the read.
    const run = read.snapshot.context?.run ?? null;
    return { outcome: "found", run, live: run !== null && !isTerminal(run.lifecycle.status) };
  }
}
