import { connect, nkeyAuthenticator, type NatsConnection } from "@nats-io/transport-node";
import { UnsupportedServer } from "../errors.js";

/** Runway relies on per-message TTL, message schedules and consumer reset: 2.12 is the floor. */
export const MIN_SERVER_VERSION = "2.12.0";

export interface ConnectionConfig {
  servers: string | string[];
  user?: string;
  pass?: string;
  /** A user NKey seed (`SU…`, the content of a `runway creds` seed file): the server checks a signature, no secret is sent. */
  nkeySeed?: string;
  /** Shown in `nats server report connections`; use the node name. */
  name?: string;
}

export function compareVersions(a: string, b: string): number {
  const pa = a
    .replace(/^v/, "")
    .split(/[.-]/)
    .map((x) => Number.parseInt(x, 10) || 0);
  const pb = b
    .replace(/^v/, "")
    .split(/[.-]/)
    .map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * Connects with failover-friendly timings (the client defaults hide a leader election behind
 * 2 s reconnect waits) and refuses a server older than {@link MIN_SERVER_VERSION}, which would
 * accept TTL and schedule headers and then silently ignore them.
 */
export async function connectNats(config: ConnectionConfig): Promise<NatsConnection> {
  const nc = await connect({
    servers: config.servers,
    ...(config.user !== undefined ? { user: config.user, pass: config.pass ?? "" } : {}),
    ...(config.nkeySeed !== undefined ? { authenticator: nkeyAuthenticator(new TextEncoder().encode(config.nkeySeed.trim())) } : {}),
    name: config.name ?? "runway",
    reconnectTimeWait: 250,
    maxReconnectAttempts: -1,
    pingInterval: 5_000,
    // The client's own request() would capture a stack trace per call; ours never throw on the hot path.
    noAsyncTraces: true,
  });
  const version = nc.info?.version ?? "0.0.0";
  if (compareVersions(version, MIN_SERVER_VERSION) < 0) {
    await nc.close();
    throw new UnsupportedServer(`nats-server ${version} is too old: Runway needs ${MIN_SERVER_VERSION} or newer (run: npm run setup)`);
  }
  return nc;
}
