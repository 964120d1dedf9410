import type { NatsConnection } from "@nats-io/transport-node";
import { listReconciliations, parseTraceparent } from "../../actors/index.js";
import type { RunReplays } from "./replays.js";
import type { RunService } from "./run-service.js";
import { requests } from "./schemas.js";
import type { TenantEndpoint } from "./serve.js";

/** `runs.start|get|list|events|cancel|signal|reconcile|reconciliations`, and `runs.trajectory|replay` where this node replays. */
export function addRunEndpoints(endpoint: TenantEndpoint, nc: NatsConnection, runs: RunService, replays: RunReplays | undefined): void {
  // A tenant key is the run's initiator, and a batch caller whatever source it writes (C037).
  // A W3C `traceparent` header makes the run's root span that span's child (docs/traces.md); a malformed one is ignored.
  endpoint("runs_start", "runs.start", requests.runsStart, (t, b, caller, headers) => {
    const trace = parseTraceparent(headers?.get("traceparent"));
    const traced = trace ? { ...b, trace } : b;
    return runs.start(t, caller ? { ...traced, initiator: caller.identity, granted_lane: caller.interactive ? "interactive" : "batch" } : traced);
  });
  endpoint("runs_get", "runs.get", requests.runsGet, async (t, b) => {
    const run = await runs.get(t, b.run_id);
    return run ? { outcome: "found", run } : { outcome: "run_not_found" };
  });
  endpoint("runs_list", "runs.list", requests.runsList, async (t, b) => ({ outcome: "ok", ...(await runs.list(t, b)) }));
  endpoint("runs_events", "runs.events", requests.runsEvents, (t, b) => runs.events(t, b.run_id, b));
  endpoint("runs_cancel", "runs.cancel", requests.runsCancel, (t, b, caller) => runs.cancel(t, b.run_id, b.reason, caller?.identity ?? b.by));
  endpoint("runs_signal", "runs.signal", requests.runsSignal, (t, b, caller) => {
    const { run_id, ...signal } = b;
    return runs.signal(t, run_id, caller ? { ...signal, by: caller.identity } : signal);
  });
  endpoint("runs_reconcile", "runs.reconcile", requests.runsReconcile, (t, b) => {
    const { run_id, ...settle } = b;
    return runs.reconcile(t, run_id, settle);
  });
  endpoint("runs_reconciliations", "runs.reconciliations", requests.runsReconciliations, async (t, b) => ({
    outcome: "ok",
    items: await listReconciliations(nc, t, b.run_id),
  }));
  if (replays) {
    endpoint("runs_trajectory", "runs.trajectory", requests.runsTrajectory, (t, b) => replays.trajectory(t, b.run_id));
    endpoint("runs_replay", "runs.replay", requests.runsReplay, (t, b) => replays.replay(t, b.run_id, { waitMs: b.wait_ms }));
  }
}
