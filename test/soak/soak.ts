// `npm run soak -- [--minutes N] [--nodes 5] [--servers 3] [--seed S] [--cycles N] [--out report.json]`: the
// soak of issue 41 §1 (docs/soak.md). Prints the report's table; exits 1 when a target is missed.
import { parseArgs } from "node:util";
import { reportTable, runSoak } from "./run-soak.js";

function positive(name: string, raw: string | undefined, fallback: number, integer = true): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    process.stderr.write(`soak: --${name} must be a positive ${integer ? "integer" : "number"} (got ${JSON.stringify(raw)})\n`);
    process.exit(2);
  }
  return n;
}

function flags(): Record<string, string | undefined> {
  try {
    return parseArgs({
      options: {
        minutes: { type: "string" },
        nodes: { type: "string" },
        servers: { type: "string" },
        seed: { type: "string" },
        cycles: { type: "string" },
        out: { type: "string" },
        "grace-ms": { type: "string" },
      },
    }).values;
  } catch (err) {
    process.stderr.write(
      `soak: ${err instanceof Error ? err.message : String(err)}\nusage: npm run soak -- [--minutes N] [--nodes N] [--servers N] [--seed S] [--cycles N] [--grace-ms MS] [--out FILE]\n`,
    );
    process.exit(2);
  }
}

const values = flags();
const servers = positive("servers", values.servers, 3);
if (servers < 3) {
  process.stderr.write("soak: --servers must be at least 3 (R3 streams, and a server kill must leave a quorum)\n");
  process.exit(2);
}
const report = await runSoak({
  minutes: positive("minutes", values.minutes, 5, false),
  nodes: positive("nodes", values.nodes, 5),
  servers,
  seed: positive("seed", values.seed, 1),
  ...(values.cycles !== undefined ? { cycles: positive("cycles", values.cycles, 1) } : {}),
  graceMs: positive("grace-ms", values["grace-ms"], 90_000),
  ...(values.out ? { out: values.out } : {}),
});
process.stdout.write(`${JSON.stringify(report)}\n\n${reportTable(report)}\n`);
if (report.missed.length > 0) {
  process.stderr.write(`soak: targets missed:\n${report.missed.map((m) => `  - ${m}`).join("\n")}\n`);
  process.exit(1);
}
process.exit(0);
