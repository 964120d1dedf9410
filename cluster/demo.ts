/**
 * `npm run demo`: NATS and a node start; a workflow with parallel branches, a map fan-out, a
 * step that fails twice then succeeds, a durable sleep and a child workflow is published and
 * started; the node is SIGKILLed in the middle of the run and started again; the run finishes
 * without repeating any completed step (a ledger file outside the node counts invocations).
 * Then an agent (cluster/demo/agent-act.ts) calls a tool, waits for a person across another
 * SIGKILL, and streams its answer.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { RunwayClient } from "./client.js";
import { followRun } from "./follow.js";
import { agentAct } from "./demo/agent-act.js";
import { startEmbeddedNats } from "./embedded-nats.js";
import { notifyWorkflow, orderWorkflow } from "./demo/workflows.js";

const here = dirname(fileURLToPath(import.meta.url));
const say = (s: string) => process.stdout.write(`${s}\n`);
const dir = mkdtempSync(join(tmpdir(), "runway-demo-"));
const ledger = join(dir, "ledger.txt");
const began = Date.now();

function startNodeProcess(url: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      // The `runway` command, as an operator starts a node.
      join(here, "..", "bin", "runway.mjs"),
      "node",
      "--servers",
      url,
      "--name",
      "demo-node",
      "--handlers",
      join(here, "demo", "handlers.ts"),
      "--lease-ttl-ms",
      "3000",
    ],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, RUNWAY_LOG: "warn", RUNWAY_LEDGER: ledger },
    },
  );
  child.stderr?.on("data", (d: Buffer) => process.stderr.write(`  [node] ${d}`));
  return new Promise((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => d.toString().includes("READY") && resolve(child));
    child.once("exit", (code) => reject(new Error(`node exited with ${code}`)));
  });
}

const nats = await startEmbeddedNats(dir);
let node: ChildProcess | undefined;
try {
  say(`▶ nats-server ${nats.url}; starting a node`);
  node = await startNodeProcess(nats.url);
  const nc = await connect({ servers: nats.url });
  const client = new RunwayClient(nc, "demo");
  await client.createTenant("demo");
  for (const wf of [notifyWorkflow, orderWorkflow]) {
    const r = await client.putDefinition(wf);
    say(`▶ published ${wf.name}: ${r.outcome} v${String(r.version)} ${String(r.digest).slice(0, 12)}…`);
  }
  const started = await client.startRun({
    definition: "process-order",
    input: { order: "A-1001" },
    start_key: { source: "demo", delivery_id: "order-A-1001" },
  });
  const run = started.run as { id: string };
  say(`▶ run ${run.id}: ${started.outcome}`);
  const again = await client.startRun({ definition: "process-order", input: { order: "A-1001" }, start_key: { source: "demo", delivery_id: "order-A-1001" } });
  say(`▶ the same start again: ${again.outcome} (same run: ${(again.run as { id: string }).id === run.id})`);

  let killed = false;
  let completedBeforeKill: string[] = [];
  // The run's stored events from its first, then live ones (its children's too), each once.
  for await (const e of followRun(nc, client, "demo", run.id, { tree: true, pollMs: 500 })) {
    const who = e.run === run.id ? "" : " (child)";
    const error = e.error as { message: string } | undefined;
    const detail = `${String(e.node ?? "")}${e.item !== undefined ? `[${String(e.item)}]` : ""}${e.attempt ? ` #${String(e.attempt)}` : ""}${error ? ` — ${error.message}` : ""}`;
    say(`  ${((Date.now() - began) / 1000).toFixed(1).padStart(5)}s  ${e.type.padEnd(15)} ${detail}${who}`);
    if (!killed && e.type === "step_succeeded" && e.node === "price" && e.run === run.id) {
      // Mid-run: the map is done, the flaky payment step is about to start.
      const got = (await client.getRun(run.id)).run as { nodes: Record<string, { status: string }> };
      completedBeforeKill = Object.entries(got.nodes)
        .filter(([, n]) => n.status === "succeeded")
        .map(([id]) => id);
      node.kill("SIGKILL");
      killed = true;
      say(`  ✖ SIGKILL the node (completed so far: ${completedBeforeKill.join(", ")}); restarting it`);
      node = await startNodeProcess(nats.url);
      say("  ▶ node restarted; the run continues from its durable state");
    }
  }

  const final = (await client.getRun(run.id)).run as { status: string; result: unknown; nodes: Record<string, { status: string; attempt?: number }> };
  const lines = existsSync(ledger) ? readFileSync(ledger, "utf8").trim().split("\n") : [];
  const invocations = new Map<string, number>();
  for (const line of lines) {
    const [r, step] = line.split(" ");
    if (r === run.id) invocations.set(step!, (invocations.get(step!) ?? 0) + 1);
  }
  const repeated = completedBeforeKill.filter((id) => (invocations.get(id) ?? 0) > 1 && id !== "price");
  const mapRepeats = [...invocations].filter(([k, v]) => k.startsWith("price[") && v > 1);
  say("");
  say("summary");
  say(`  run                ${run.id}`);
  say(`  status             ${final.status} in ${((Date.now() - began) / 1000).toFixed(1)} s`);
  say(`  result             ${JSON.stringify(final.result)}`);
  say(
    `  steps              ${Object.entries(final.nodes)
      .map(([id, n]) => `${id}:${n.status}`)
      .join("  ")}`,
  );
  say(`  charge attempts    ${invocations.get("charge") ?? 0} (fails twice, then succeeds)`);
  say(`  crash              SIGKILL after: ${completedBeforeKill.join(", ")}`);
  say(
    `  repeated work      ${repeated.length + mapRepeats.length === 0 ? "none — no completed step's handler ran again" : `REPEATED: ${[...repeated, ...mapRepeats.map(([k]) => k)].join(", ")}`}`,
  );
  const agentShown = await agentAct({
    nc,
    client,
    natsUrl: nats.url,
    ledger: join(dir, "refunds.jsonl"),
    say,
    elapsed: () => `${((Date.now() - began) / 1000).toFixed(1).padStart(5)}s`,
    killAndRestartNode: async () => {
      node?.kill("SIGKILL");
      node = await startNodeProcess(nats.url);
    },
  });
  await nc.close();
  if (final.status !== "succeeded" || repeated.length + mapRepeats.length > 0 || !agentShown) process.exitCode = 1;
} finally {
  node?.kill("SIGTERM");
  if (node && node.exitCode === null) await new Promise((r) => node!.once("exit", r));
  await nats.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(process.exitCode ?? 0);
