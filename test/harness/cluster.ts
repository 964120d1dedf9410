// An n-node JetStream cluster of real nats-server processes on loopback.
import { CLUSTER_NAME, RUNWAY_USER, SYS_USER, ServerProcess, freePort, jetStreamAnswers, makeTempDir, monitorJson } from "./nats-server.js";
import type { ConnectOptions, NatsServerHandle } from "./nats-server.js";
import { toolPaths } from "./tools.js";
import { errorText, waitFor } from "./wait.js";

export interface StartClusterOptions {
  /** Deadline for the whole cluster to elect a meta leader (default 30 s). */
  readyTimeoutMs?: number;
  extraConfig?: string;
  maxMemoryStore?: string;
  maxFileStore?: string;
  debug?: boolean;
  /** Members do not advertise each other's client URLs: a client stays on the URLs it was given (the soak's proxies). */
  noAdvertise?: boolean;
}

export interface ClusterHandle {
  readonly name: string;
  readonly servers: NatsServerHandle[];
  readonly urls: string[];
  /** All urls, runway user: the client fails over between members. */
  connectOptions(): ConnectOptions;
  sysConnectOptions(): ConnectOptions;
  /** Name of the current JetStream meta leader, as the running members report it. */
  metaLeader(): Promise<string | undefined>;
  /** Wait until every running member agrees on a meta leader and reports healthy. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  serverByName(name: string): NatsServerHandle;
  stop(): Promise<void>;
  dispose(): Promise<void>;
}

interface JszMeta {
  meta_cluster?: { name?: string; leader?: string; cluster_size?: number; replicas?: { name: string; current?: boolean; offline?: boolean }[] };
}

async function leaderSeenBy(s: NatsServerHandle): Promise<string | undefined> {
  const { body } = await monitorJson(s.monitorUrl, "/jsz", 1500);
  const leader = (body as JszMeta).meta_cluster?.leader;
  return leader ? leader : undefined;
}

/** Start n servers (n1..nN) with routes to each other; resolves once JetStream has a meta
 *  leader that every member knows and a client can use. */
export async function startCluster(n = 3, opts: StartClusterOptions = {}): Promise<ClusterHandle> {
  if (n < 1) throw new Error("startCluster: n must be >= 1");
  const { natsServer } = await toolPaths();
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
  const clusterPorts: number[] = [];
  for (let i = 0; i < n; i++) clusterPorts.push(await freePort());

  const servers: ServerProcess[] = [];
  for (let i = 0; i < n; i++) {
    const name = `n${i + 1}`;
    servers.push(
      new ServerProcess(
        natsServer,
        {
          name,
          dir: makeTempDir(name),
          port: await freePort(),
          monitorPort: await freePort(),
          cluster: { port: clusterPorts[i] as number, routePorts: clusterPorts.filter((_, j) => j !== i), ...(opts.noAdvertise ? { noAdvertise: true } : {}) },
          extraConfig: opts.extraConfig,
          maxMemoryStore: opts.maxMemoryStore,
          maxFileStore: opts.maxFileStore,
          debug: opts.debug,
        },
        // a member restarted later must be caught up, not merely listening
        "cluster-member",
        readyTimeoutMs,
      ),
    );
  }
  const urls = servers.map((s) => s.url);

  const handle: ClusterHandle = {
    name: CLUSTER_NAME,
    servers,
    urls,
    connectOptions: () => ({ servers: [...urls], ...RUNWAY_USER }),
    sysConnectOptions: () => ({ servers: [...urls], ...SYS_USER }),
    async metaLeader() {
      for (const s of servers) {
        if (!s.isRunning() || s.isPaused()) continue;
        const leader = await leaderSeenBy(s).catch(() => undefined);
        if (leader) return leader;
      }
      return undefined;
    },
    async waitHealthy(timeoutMs = readyTimeoutMs) {
      await waitFor(
        async () => {
          const up = servers.filter((s) => s.isRunning() && !s.isPaused());
          const leaders = await Promise.all(up.map(leaderSeenBy));
          const first = leaders[0];
          if (!first || leaders.some((l) => l !== first)) throw new Error(`members disagree on the meta leader: ${JSON.stringify(leaders)}`);
          await jetStreamAnswers(
            up.map((s) => s.url),
            1500,
          );
          for (const s of up) {
            const h = await monitorJson(s.monitorUrl, "/healthz", 1500);
            if (h.status !== 200) throw new Error(`${s.name} healthz ${h.status}: ${JSON.stringify(h.body)}`);
          }
          // The leader must see every running member as a current, online peer, or an R3
          // placement right after start fails with "no suitable peers for placement".
          const leader = up.find((s) => s.name === first);
          if (leader) {
            const { body } = await monitorJson(leader.monitorUrl, "/jsz", 1500);
            const replicas = (body as JszMeta).meta_cluster?.replicas ?? [];
            const current = replicas.filter((r) => r.current && !r.offline).map((r) => r.name);
            const missing = up.filter((s) => s.name !== first && !current.includes(s.name)).map((s) => s.name);
            if (missing.length > 0) throw new Error(`meta leader ${first} does not yet see ${missing.join(", ")} as current peers`);
          }
          return true;
        },
        { timeoutMs, intervalMs: 50, describe: `cluster ${CLUSTER_NAME} (${servers.map((s) => s.name).join(",")}) to have a JetStream meta leader` },
      );
    },
    serverByName(name: string) {
      const s = servers.find((x) => x.name === name);
      if (!s) throw new Error(`no server named ${name} in cluster (have ${servers.map((x) => x.name).join(", ")})`);
      return s;
    },
    async stop() {
      await Promise.all(servers.map((s) => s.stop()));
    },
    async dispose() {
      await Promise.all(servers.map((s) => s.dispose()));
    },
  };

  try {
    for (const s of servers) s.spawn();
    await Promise.all(servers.map((s) => s.waitReady("connect")));
    await handle.waitHealthy();
    return handle;
  } catch (err) {
    const logs = servers.map((s) => `--- ${s.name} (${s.logPath}):\n${s.logTail(15)}`).join("\n");
    await handle.dispose();
    throw new Error(`${errorText(err)}\n${logs}`, { cause: err });
  }
}
