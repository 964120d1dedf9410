// w1 beside the peers, each window compared with the peer window measured after as many runs:
// Runway's first window (after 80 runs) with Restate's workflow window (after 80: 40 workflow and
// 40 service runs through its worker), its second (after 280) with Restate's service window
// (after the workflow window's 200 more). Reads what `../shared/bench-peers/side.sh` left in
// `$TMPDIR/runway-bench-peers` (or the folder given); prints a JSON line per round and the medians.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.argv[2] ?? join(process.env.TMPDIR ?? "/tmp", "runway-bench-peers");
const lines = readFileSync(join(dir, "runway.jsonl"), "utf8")
  .split("\n")
  .filter((l) => l.startsWith("{"));
const runway = lines.map((l) => JSON.parse(l)).filter((d) => d.bench === "w1");
const peer = (name, round) => {
  const file = join(dir, "results", `${name}-side${round}.json`);
  return existsSync(file) ? JSON.parse(readFileSync(file, "utf8"))[0]?.stepsPerSec : undefined;
};
const ratio = (a, b) => (typeof a === "number" && typeof b === "number" ? Math.round((a / b) * 100) / 100 : null);
const median = (xs) => {
  const s = xs.filter((x) => typeof x === "number").sort((a, b) => a - b);
  return s.length === 0 ? null : s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const rounds = runway.map((r, i) => {
  const workflow = peer("restate-w1", i + 1);
  const service = peer("restate-w1svc", i + 1);
  return {
    round: i + 1,
    runway_first_window: { after_runs: r.warmup_runs, steps_per_s: r.steps_per_s },
    runway_second_window: { after_runs: r.second_window_after_runs ?? null, steps_per_s: r.second_window_steps_per_s ?? null },
    restate_workflow_steps_per_s: workflow !== undefined ? Math.round(workflow) : null,
    restate_service_steps_per_s: service !== undefined ? Math.round(service) : null,
    first_over_workflow: ratio(r.steps_per_s, workflow),
    second_over_service: ratio(r.second_window_steps_per_s, service),
    first_over_service: ratio(r.steps_per_s, service),
  };
});
for (const r of rounds) console.log(JSON.stringify(r));
const med = (f) => median(rounds.map(f));
console.log(
  JSON.stringify({
    medians: {
      runway_first_window: med((r) => r.runway_first_window.steps_per_s),
      runway_second_window: med((r) => r.runway_second_window.steps_per_s),
      restate_workflow: med((r) => r.restate_workflow_steps_per_s),
      restate_service: med((r) => r.restate_service_steps_per_s),
      first_over_workflow: med((r) => r.first_over_workflow),
      second_over_service: med((r) => r.second_over_service),
      first_over_service: med((r) => r.first_over_service),
    },
  }),
);
