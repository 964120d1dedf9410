import { fileURLToPath } from "node:url";
import { startRunwayNode, type RunwayWorkflowNode } from "../../cluster/runway-node.js";
import { createLogger, partitionOf, partitionBucket, partitionStream, kvSubject, readLast } from "../../runtime/index.js";
import { startServer, waitFor, type NatsServerHandle } from "../harness/index.js";
import { percentiles, progress, windowed } from "./stats.js";

const handlers = fileURLToPath(new URL("../fixtures/handlers.ts", import.meta.url));

export interface AdmissionOptions {
  /** Runs the big tenant holds (admitted and not ended) while it is measured. */
  running: number;
  /** Runs waiting in the big tenant's queue (a project capped at 0 holds them). */
  queued: number;
  /** Runs the small tenant holds. */
  small: number;
  /** Measured admissions per tenant, interleaved (big, small in a random order each round). */
  samples: number;
  /** Admissions in flight while the big tenant is filled. */
  window?: number;
}

export interface AdmissionResult {
  big: { running: number; queued: number; record_bytes: number } & ReturnType<typeof percentiles>;
  small: { running: number; queued: number; record_bytes: number } & ReturnType<typeof percentiles>;
  /** big p50 / small p50. */
  ratio_p50: number;
  fill_s: number;
  samples: number;
}

interface Setup {
  server: NatsServerHandle;
  node: RunwayWorkflowNode;
}

async function setup(): Promise<Setup> {
  const server = await startServer();
  const node = await startRunwayNode({
    connection: server.connectOptions(),
    name: "admission",
    handlers: [handlers],
    logger: createLogger("admission", "warn"),
    sweepIntervalMs: false,
  });
  await waitFor(() => node.node.host.ownedPartitions().length === 32, { timeoutMs: 30_000, describe: "partitions" });
  return { server, node };
}

async function admitted(node: RunwayWorkflowNode, tenant: string, run: string, project: string, want: string): Promise<void> {
  const answer = await node.tenants.admit(tenant, run, project);
  if (answer.outcome !== want) throw new Error(`admission of ${run} in ${tenant}: ${JSON.stringify(answer)} (wanted ${want})`);
}

async function recordBytes(node: RunwayWorkflowNode, tenant: string): Promise<number> {
  const p = partitionOf(tenant, 32);
  const read = await readLast(node.node.nc, partitionStream(p), kvSubject(partitionBucket(p), `tenant.${tenant}`));
  return read.outcome === "found" ? read.message.data.length : 0;
}

/**
 * Admission cost against a tenant's population: a big tenant holding `running` runs with
 * `queued` more waiting, and a small one holding `small`, both with room for one more run. Each
 * round admits one new run in each tenant (in a random order) and then ends it, so both
 * populations stay where they are; the admission alone is timed (TenantService.admit on the
 * node that serves the tenant: the command, its fenced write(s), the answer).
 */
export async function measureAdmission(options: AdmissionOptions): Promise<AdmissionResult> {
  const { server, node } = await setup();
  try {
    const window = options.window ?? 64;
    // Room for exactly one more run beside the big tenant's population; `held` is capped at 0, so its runs queue.
    const cap = Math.max(options.running + 1, options.small + 1);
    for (const t of ["big", "small"]) {
      const created = await node.tenants.create(t, { max_concurrency: cap, project_max_concurrency: { held: 0 }, day_cap: 1_000_000_000 });
      if (created.outcome !== "created") throw new Error(`create ${t}: ${JSON.stringify(created)}`);
    }
    const t0 = performance.now();
    progress(`admission: filling big (${options.running} running, ${options.queued} queued)`);
    await windowed(options.running, window, (i) => admitted(node, "big", `big_r${i}`, `p${i % 10}`, "admitted"));
    await windowed(options.queued, window, (i) => admitted(node, "big", `big_q${i}`, "held", "queued"));
    await windowed(options.small, window, (i) => admitted(node, "small", `small_r${i}`, "p0", "admitted"));
    const fill_s = (performance.now() - t0) / 1000;
    progress(`admission: filled in ${fill_s.toFixed(1)} s; measuring ${options.samples} rounds`);
    const lat: Record<"big" | "small", number[]> = { big: [], small: [] };
    const round = async (tenant: "big" | "small", i: number) => {
      const run = `${tenant}_m${i}`;
      const s = performance.now();
      await admitted(node, tenant, run, "p1", "admitted");
      lat[tenant].push(performance.now() - s);
      const ended = await node.tenants.runEnded(tenant, run, "p1");
      if (ended.outcome !== "ended") throw new Error(`end of ${run}: ${JSON.stringify(ended)}`);
    };
    // Warm-up: both tenants' actors cached, the JIT settled.
    for (let i = 0; i < 20; i++) {
      await round("big", -1 - i);
      await round("small", -1 - i);
    }
    lat.big.length = 0;
    lat.small.length = 0;
    for (let i = 0; i < options.samples; i++) {
      const order: ("big" | "small")[] = Math.random() < 0.5 ? ["big", "small"] : ["small", "big"];
      for (const t of order) await round(t, i);
    }
    const big = percentiles(lat.big);
    const small = percentiles(lat.small);
    const viewBig = await node.tenants.get("big");
    const viewSmall = await node.tenants.get("small");
    return {
      big: { running: viewBig?.active_runs ?? -1, queued: viewBig?.queued_runs ?? -1, record_bytes: await recordBytes(node, "big"), ...big },
      small: { running: viewSmall?.active_runs ?? -1, queued: viewSmall?.queued_runs ?? -1, record_bytes: await recordBytes(node, "small"), ...small },
      ratio_p50: Math.round((big.p50 / small.p50) * 100) / 100,
      fill_s: Math.round(fill_s * 10) / 10,
      samples: options.samples,
    };
  } finally {
    await node.stop();
    await server.dispose();
  }
}

/** `npm run bench -- admission`: 10,000 running and 5,000 queued against 10 (override with ADM_RUNNING, ADM_QUEUED, ADM_SAMPLES). */
export async function admission(): Promise<Record<string, unknown>> {
  const result = await measureAdmission({
    running: Number(process.env.ADM_RUNNING ?? 9_999),
    queued: Number(process.env.ADM_QUEUED ?? 5_000),
    small: 9,
    samples: Number(process.env.ADM_SAMPLES ?? 500),
  });
  return { bench: "admission", ...result };
}
