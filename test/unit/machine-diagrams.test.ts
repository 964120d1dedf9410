import { readFileSync } from "node:fs";
import { expect, it } from "vitest";
import { executionMachine, machineDiagrams } from "../../machines/index.js";
import { mermaidOf } from "../../machines/diagram.js";

it("the diagrams machines/README.md embeds are the production machines as they are now (runway machines)", () => {
  const readme = readFileSync(new URL("../../machines/README.md", import.meta.url), "utf8");
  const embedded = readme.slice(readme.indexOf("<!-- machines:begin -->") + "<!-- machines:begin -->".length, readme.indexOf("<!-- machines:end -->")).trim();
  expect(embedded).toBe(machineDiagrams().trim());
});

it("a diagram names every state, each move with its event, and each event a state takes without moving (not drawn as a loop)", () => {
  const diagram = mermaidOf(executionMachine);
  for (const state of ["new", "live", "queued", "running", "waiting", "succeeded", "failed", "cancelled"]) expect(diagram).toContain(`state "${state}"`);
  // The live statuses are drawn inside their compound state, which starts at queued.
  expect(diagram).toMatch(/state run_live \{\n {2}\[\*\] --> run_live_queued\n[\s\S]*state "running" as run_live_running[\s\S]*\n {2}\}\n/);
  for (const move of [
    "run_new --> run_live: run.create",
    "run_live_queued --> run_live_running: lifecycle.claim",
    "run_live_running --> run_succeeded: lifecycle.succeed",
  ])
    expect(diagram).toContain(move);
  for (const event of ["step.result", "run.admitted", "approval.decide"]) expect(diagram).toContain(event);
  expect(diagram).not.toMatch(/run_(\w+) --> run_\1:/);
  expect(diagram.split("\n").filter((l) => l.includes("-->")).length).toBeLessThan(30);
});
