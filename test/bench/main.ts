/** `npm run bench -- <name>`: runs one benchmark and prints one JSON line on stdout. */
import { killAll } from "../harness/index.js";
import type { EnvSetting } from "../../cluster/env-setting.js";
import { applyHelperThreads, describeHelpers, HELPER_THREADS } from "../../cluster/helper-threads.js";
import { applyEventLoopSpin, EVENT_LOOP_SPIN } from "../../cluster/event-loop-spin.js";
import { a2a } from "./a2a.js";
import { agent } from "./agent.js";
import { ab } from "./ab.js";
import { abFresh } from "./ab-fresh.js";
import { actorBench } from "./actor.js";
import { admission } from "./admission.js";
import { approvals } from "./approvals.js";
import { cancel } from "./cancel.js";
import { cpuBench } from "./cpu.js";
import { floor } from "./floor.js";
import { heartbeats } from "./heartbeats.js";
import { tools } from "./tools.js";
import { traces } from "./traces.js";
import { fairness, w1, w2, w3 } from "./workflow.js";
import { w4, w5 } from "./resilience.js";
import { w1cluster } from "./cluster.js";

const benches: Record<string, () => Promise<Record<string, unknown>>> = {
  ab,
  abfresh: abFresh,
  actor: actorBench,
  a2a,
  admission,
  agent,
  approvals,
  cancel,
  cpu: cpuBench,
  floor,
  w1,
  w1cluster,
  w2,
  w3,
  w4,
  w5,
  fairness,
  heartbeats,
  tools,
  traces,
};

const name = process.argv[2];
const bench = name ? benches[name] : undefined;
if (!bench) {
  process.stderr.write(`usage: npm run bench -- <${Object.keys(benches).join("|")}>\n`);
  process.exit(2);
}
// The benchmarks run their nodes in this process, tuned as `runway node` would be (RUNWAY_HELPER_THREADS, RUNWAY_EVENT_LOOP_SPIN).
// Under the small-host profile unless told otherwise, whatever the machine: the one their figures
// were measured with (docs/tuning.md). Set here, the nodes a benchmark spawns inherit it.
if (!process.env.RUNWAY_PROFILE) process.env.RUNWAY_PROFILE = "small-host";
function settingOrExit<T extends string>(setting: EnvSetting<T>): T {
  const value = setting.of(process.env);
  if (value) return value;
  process.stderr.write(`${setting.refusal(process.env)}\n`);
  process.exit(2);
}
const spin = applyEventLoopSpin(settingOrExit(EVENT_LOOP_SPIN));
// Before any node starts its pool, as `runway node` does (a node a benchmark spawns applies its own).
const helpers = describeHelpers(applyHelperThreads(settingOrExit(HELPER_THREADS)));
try {
  const result = await bench();
  process.stdout.write(
    `${JSON.stringify({ ...result, profile: process.env.RUNWAY_PROFILE, node_flags: process.execArgv.join(" ") || "none", helper_threads: helpers, event_loop_spin: spin, at: new Date().toISOString() })}\n`,
  );
} finally {
  await killAll();
}
process.exit(0);
