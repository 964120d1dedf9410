import { randomUUID } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import { RunwayFault } from "../../runtime/index.js";
import { compareTrajectories, readTrajectory, tenantOfRun, type TrajectoryLine } from "../../actors/index.js";
import type { RunService } from "./run-service.js";

export type TrajectoryResult =
  { outcome: "trajectory"; run: string; status: string | null; lines: TrajectoryLine[] } | { outcome: "run_not_found" | "run_compacted" };

export type ReplayResult =
  | {
      outcome: "replayed";
      original: string;
      replay: string;
      status: string;
      identical: boolean;
      /** The first line (in the canonical order) where the replay's trajectory differs from the original's. */
      divergence?: { at: number; original: TrajectoryLine | null; replay: TrajectoryLine | null };
    }
  /** The replay run did not end within the wait: ask for its trajectory later. */
  | { outcome: "replay_running"; original: string; replay: string }
  | { outcome: "run_not_found" | "run_not_ended" | "run_compacted" }
  | { outcome: "replay_refused"; reason: string };

const ENDED = new Set(["succeeded", "failed", "cancelled"]);

/**
 * Trajectories and replays. A replay re-executes a finished run's logic — the same pinned
 * definition version, the same input, its handlers run again — as a new run whose every tool call
 * is answered from the original's receipts (`ReplayTools`): no call leaves the node. Its
 * trajectory is compared with the original's.
 */
export class RunReplays {
  constructor(private readonly deps: { nc: NatsConnection; partitions: number; runs: RunService }) {}

  async trajectory(tenant: string, id: string): Promise<TrajectoryResult> {
    if (tenantOfRun(id) !== tenant) return { outcome: "run_not_found" };
    const run = await this.deps.runs.get(tenant, id);
    if (!run) return { outcome: "run_not_found" };
    if (run.compacted) return { outcome: "run_compacted" };
    const read = await readTrajectory(this.deps.nc, this.deps.partitions, id);
    if (read.outcome !== "read") throw new RunwayFault("store_unavailable", `trajectory of ${id}: ${read.detail}`, { kind: "retryable" });
    return { outcome: "trajectory", run: id, status: read.status, lines: read.lines };
  }

  async replay(tenant: string, id: string, options: { waitMs: number }): Promise<ReplayResult> {
    if (tenantOfRun(id) !== tenant) return { outcome: "run_not_found" };
    const original = await this.deps.runs.get(tenant, id);
    if (!original) return { outcome: "run_not_found" };
    if (original.compacted) return { outcome: "run_compacted" };
    if (!ENDED.has(original.status)) return { outcome: "run_not_ended" };
    const started = await this.deps.runs.start(tenant, {
      definition: original.definition.name,
      version: original.definition.version,
      input: original.input,
      start_key: { source: "replay", delivery_id: `${id}/${randomUUID()}` },
      source: "replay",
      replay_of: id,
    });
    if (started.outcome !== "started") return { outcome: "replay_refused", reason: started.outcome };
    const replay = started.run.id;
    const deadline = Date.now() + options.waitMs;
    let status = started.run.status as string;
    for (let delay = 10; !ENDED.has(status); delay = Math.min(delay * 2, 200)) {
      if (Date.now() > deadline) return { outcome: "replay_running", original: id, replay };
      await new Promise((r) => setTimeout(r, delay));
      status = (await this.deps.runs.get(tenant, replay))?.status ?? status;
    }
    const [a, b] = await Promise.all([this.trajectory(tenant, id), this.trajectory(tenant, replay)]);
    if (a.outcome !== "trajectory" || b.outcome !== "trajectory")
      throw new RunwayFault("replay_unreadable", `trajectories of ${id} and ${replay}`, { kind: "retryable" });
    const compared = compareTrajectories(a.lines, b.lines);
    return compared.identical
      ? { outcome: "replayed", original: id, replay, status, identical: true }
      : {
          outcome: "replayed",
          original: id,
          replay,
          status,
          identical: false,
          divergence: { at: compared.at, original: compared.original, replay: compared.replay },
        };
  }
}
