import { readFileSync } from "node:fs";
import { expect, it } from "vitest";
import { executionMachine, machineDiagrams } from "../../machines/index.js";
import { mermaidOf } from "../../machines/diagram.js";

it("the diagrams machines/README.md embeds are the production machines as they are now (runway machines)", () => {
  const readme = readFileSync(new URL("../../machines/README.md", import.meta.url), "utf8");
  const embedded = readme.slice(readme.indexOf("<!-- machines:begin -->") + "<!-- machines:begin -->".length, readme.indexOf("<!-- machines:end -->")).trim();
  expect(embedded).toBe(machineDiagrams().trim());
});

it("a diagram names every state and every guard and action of the machine", () => {
  const diagram = mermaidOf(executionMachine);
  for (const state of ["new", "queued", "running", "waiting", "succeeded", "failed", "cancelled"]) expect(diagram).toContain(`state "${state}"`);
  for (const name of ["resultIsCurrent", "applyResult", "lifecycleIs", "answerStaleCancel", "admit"]) expect(diagram).toContain(name);
});
