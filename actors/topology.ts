import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, RetentionPolicy, StorageType, type StreamConfig } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";
import { LIVE_BUCKET, RECONCILE_BUCKET, APPROVALS_BUCKET, runsStreamConfig } from "./run/index.js";
import { meterStreamConfig } from "./tenant/index.js";
import { DEFINITIONS_BUCKET } from "./definitions/index.js";
import { RESULTS_STORE } from "./engine/index.js";
import { ensureBucket, ensureFlags, streamConfigs } from "../runtime/index.js";

/** JetStream resources of the workflow domain, beside the runtime's own. */
export const AUDIT_STREAM = "RUNWAY_AUDIT";

/**
 * `rw.evt.<tenant>.<root>.<run>.<type>`: live progress events (plain publishes; each run's are
 * read back from its journal, `runs.events`). A client follows a run or a whole tree by subject.
 */
export function eventSubject(tenant: string, root: string, run: string, type: string): string {
  return `rw.evt.${tenant}.${root}.${run}.${type}`;
}

export async function ensureDomainTopology(nc: NatsConnection, replicas: number): Promise<void> {
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  const audit: Partial<StreamConfig> & { name: string } = {
    name: AUDIT_STREAM,
    description: "Runway consequential decisions and effects: rw.audit.<tenant>.<kind> (long retention)",
    subjects: ["rw.audit.>"],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    num_replicas: replicas,
    duplicate_window: 120_000_000_000,
  };
  const quota: Partial<StreamConfig> & { name: string } = {
    name: "RUNWAY_QUOTA",
    description: "Cluster-wide provider quota counters: rw.quota.<tenant>.<provider>.<window>",
    subjects: ["rw.quota.>"],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    num_replicas: replicas,
    max_age: 10 * 60 * 1_000_000_000,
    allow_msg_counter: true,
  } as Partial<StreamConfig> & { name: string };
  const meter = { ...meterStreamConfig(replicas), storage: StorageType.File, retention: RetentionPolicy.Limits } as Partial<StreamConfig> & { name: string };
  // One listing of what the server has; a stream or bucket already there is left as it is.
  const have = await streamConfigs(jsm);
  for (const config of [audit, quota, meter, runsStreamConfig(replicas) as Partial<StreamConfig> & { name: string }]) {
    if (!have.has(config.name)) await jsm.streams.add(config);
  }
  const kvm = new Kvm(nc);
  const buckets: [string, number, string][] = [
    [DEFINITIONS_BUCKET, 5, "Runway workflow definitions: <tenant>.<name>.v<N>, .latest, .draft; plan.<digest>"],
    [LIVE_BUCKET, 1, "Runway live-run index: p<partition>.<run> for every run that may be live"],
    [APPROVALS_BUCKET, 1, "Runway reviewers' inbox: <tenant>.<approval id hash> for every pending approval"],
    [RECONCILE_BUCKET, 1, "Runway steps held for reconciliation: <tenant>.<run>.<effect key hash>"],
  ];
  for (const [name, history, description] of buckets) await ensureBucket(kvm, name, { history, replicas, storage: "file", description }, have);
  // Per-message TTL lets a removed entry's purge marker expire (no delete markers: nothing watches it).
  for (const bucket of [LIVE_BUCKET, RECONCILE_BUCKET, APPROVALS_BUCKET]) await ensureFlags(jsm, `KV_${bucket}`, { allow_msg_ttl: true }, have);
  if (!have.has(`OBJ_${RESULTS_STORE}`)) {
    const objm = new Objm(nc);
    try {
      await objm.open(RESULTS_STORE);
    } catch {
      await objm.create(RESULTS_STORE, { replicas, storage: StorageType.File, description: "Step results over the inline bound, by reference" });
    }
  }
}
