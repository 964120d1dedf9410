import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { lastValues } from "../../actors/index.js";
import { WatchedBucket } from "../../runtime/index.js";
import { PUSH_BUCKET } from "./push-configs.js";

/** Bucket of the tenants' exposed agents: one key per agent, `<tenant>.<agent>`. */
export const AGENTS_BUCKET = "rw_agents";

/** One skill as the agent's card shows it (A2A `AgentSkill`). */
export interface AgentSkillSetting {
  id: string;
  name: string;
  description: string;
  tags: string[];
  examples?: string[];
}

/**
 * A published definition a tenant exposes as an A2A agent. `public`: callers need no
 * credentials (an explicit per-agent choice); otherwise the card asks for a bearer token and a
 * request is answered only once an authenticator admits its caller.
 */
export interface ExposedAgent {
  name: string;
  definition: string;
  description?: string;
  skills?: AgentSkillSetting[];
  public: boolean;
  exposed_at: number;
}

/** Bucket of the A2A tasks: one key per task, `<tenant>.<agent>.<task id>` (the task id is its run's id). */
export const TASKS_BUCKET = "rw_a2a_tasks";

/** The agents', their tasks' and the tasks' push configs' buckets. */
export async function ensureA2aBuckets(nc: NatsConnection, replicas: number): Promise<void> {
  const kvm = new Kvm(nc);
  for (const [bucket, description] of [
    [AGENTS_BUCKET, "Runway A2A agents per tenant: <tenant>.<agent>"],
    [TASKS_BUCKET, "Runway A2A tasks: <tenant>.<agent>.<run id>"],
    [PUSH_BUCKET, "Runway A2A push notification configs c.<tenant>.<agent>.<run id>.<config id>, their deliveries d.<same>"],
  ] as const) {
    try {
      await kvm.create(bucket, { history: 1, replicas, storage: "file", description });
    } catch (err) {
      if (!/already in use|exists/i.test(String((err as Error).message))) throw err;
    }
  }
}

/**
 * The tenants' exposed agents in `rw_agents`. Every A2A request reads its agent's exposure, so
 * every node keeps a copy in memory kept current by a watch of the bucket ({@link WatchedBucket}):
 * a request costs no store read, and a hide on any node holds on this one as soon as its watch
 * hears it (this node's own writes at once).
 */
export class AgentStore {
  private kv: Promise<KV> | undefined;
  private readonly watched = new WatchedBucket<ExposedAgent & { revision: number }>(
    () => this.bucket(),
    (e) => (e.length > 0 ? { ...e.json<ExposedAgent>(), revision: e.revision } : null),
  );

  constructor(private readonly nc: NatsConnection) {}

  private bucket(): Promise<KV> {
    return (this.kv ??= new Kvm(this.nc).open(AGENTS_BUCKET));
  }

  /** Starts the watch now (the node's start), rather than on the first request. */
  async start(): Promise<void> {
    await this.watched.start();
  }

  /** Stops the watch (the node is stopping). */
  async close(): Promise<void> {
    await this.watched.close();
  }

  async put(tenant: string, agent: ExposedAgent): Promise<void> {
    const key = `${tenant}.${agent.name}`;
    const revision = await (await this.bucket()).put(key, JSON.stringify(agent));
    this.watched.remember(key, revision, { ...agent, revision });
  }

  async get(tenant: string, name: string): Promise<(ExposedAgent & { revision: number }) | undefined> {
    return (await this.watched.get(`${tenant}.${name}`)) ?? undefined;
  }

  async list(tenant: string): Promise<ExposedAgent[]> {
    await this.bucket();
    const out = (await lastValues(this.nc, AGENTS_BUCKET, `${tenant}.*`))
      .filter((v) => v.data.length > 0)
      .map((v) => JSON.parse(new TextDecoder().decode(v.data)) as ExposedAgent);
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** True when the agent was exposed (and is now hidden). */
  async hide(tenant: string, name: string): Promise<boolean> {
    const exposed = await this.get(tenant, name);
    if (!exposed) return false;
    await (await this.bucket()).delete(`${tenant}.${name}`);
    this.watched.removed(`${tenant}.${name}`, exposed.revision);
    return true;
  }
}
