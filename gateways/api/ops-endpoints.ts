import type { NatsConnection } from "@nats-io/transport-node";
import type { NodeMetrics, Sweeper } from "../../actors/index.js";
import { listDeadLetters, StoreUnavailable, type MicroService } from "../../runtime/index.js";
import { requests } from "./schemas.js";
import { serve } from "./serve.js";

/** What a node says of itself in `ops.nodes`. */
export interface NodeSelf {
  /** The partitions it owns now. */
  owned(): readonly number[];
  /** Its HTTP server's URL (A2A agents, the console), when it serves one. */
  httpUrl?(): string | undefined;
}

/** The operators' `ops.metrics`, `ops.metrics.prometheus`, `ops.nodes`, `ops.sweep` (each node answers) and `ops.dead_letters`. */
export function addOpsEndpoints(service: MicroService, nc: NatsConnection, metrics: NodeMetrics, sweeper: Sweeper | undefined, self?: NodeSelf): void {
  const startedAt = Date.now();
  // Every node answers (its own queue group): `nats req runway.v1.ops.metrics '' --replies 0`.
  service.addEndpoint("metrics", {
    subject: "runway.v1.ops.metrics",
    queue: `node-${metrics.node}`,
    handler: (req) => req.respond(JSON.stringify({ outcome: "ok", ...metrics.json() })),
  });
  service.addEndpoint("metrics_prometheus", {
    subject: "runway.v1.ops.metrics.prometheus",
    queue: `node-${metrics.node}`,
    handler: (req) => req.respond(metrics.prometheus()),
  });
  // Every node answers who it is and which partitions it owns now: `nats req runway.v1.ops.nodes '' --replies 0`.
  if (self) {
    service.addEndpoint("nodes", {
      subject: "runway.v1.ops.nodes",
      queue: `node-${metrics.node}`,
      handler: (req) =>
        req.respond(
          JSON.stringify({
            outcome: "ok",
            node: metrics.node,
            pid: process.pid,
            started_at: startedAt,
            partitions: [...self.owned()].sort((a, b) => a - b),
            http_url: self.httpUrl?.() ?? null,
          }),
        ),
    });
  }
  // Every node sweeps the partitions it serves now and answers its report: `nats req runway.v1.ops.sweep '' --replies 0`.
  if (sweeper) {
    service.addEndpoint("sweep", {
      subject: "runway.v1.ops.sweep",
      queue: `node-${metrics.node}`,
      handler: (req) => serve(req, requests.sweep, async () => ({ outcome: "swept", node: metrics.node, report: await sweeper.pass() })),
    });
  }
  // Read from the dead-letter stream, so any one node answers.
  service.addEndpoint("dead_letters", {
    subject: "runway.v1.ops.dead_letters",
    handler: (req) =>
      serve(req, requests.deadLetters, async (b) => {
        const listed = await listDeadLetters(nc, { limit: b.limit });
        if (listed.outcome === "unavailable") throw new StoreUnavailable(`dead letters: ${listed.detail}`);
        return { ...listed };
      }),
  });
}
