import { expect, it } from "vitest";
import { reportTable, runSoak } from "./run-soak.js";

// The short schedule of the soak (docs/soak.md): one node SIGKILL, one node SIGSTOP, one NATS
// server SIGKILL, one network partition of a node and one server's storage quota filled during a workload of SOAK_MINUTES (default 3)
// on 3 servers and 3 nodes; at the end every partition stream is scanned for dual-authority writes.
const minutes = Number(process.env.SOAK_MINUTES ?? 3);
const graceMs = 90_000;
// cluster and nodes up (~30 s under load) + the workload + the grace + the analysis
const timeoutMs = 60_000 + minutes * 60_000 + graceMs + 60_000;

it(
  "41.1 a short soak (one kill of each kind) meets every target",
  async () => {
    const lines: string[] = [];
    const report = await runSoak({ minutes, nodes: 3, servers: 3, seed: Number(process.env.SOAK_SEED ?? 1), cycles: 1, graceMs, log: (l) => lines.push(l) });
    console.log(`${lines.join("\n")}\n${JSON.stringify(report)}\n${reportTable(report)}`);
    expect(report.faults.map((f) => f.kind).sort()).toEqual(["node_kill", "node_partition", "node_stop", "server_kill", "server_quota"]);
    expect(report.dualAuthority.writesScanned).toBeGreaterThan(0);
    expect(report.runs.started).toBeGreaterThan(0);
    expect(report.missed).toEqual([]);
  },
  timeoutMs,
);
