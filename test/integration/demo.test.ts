import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { spawnTsx } from "../harness/index.js";

it("npm run demo completes within its time budget: the run survives a SIGKILL and no completed step runs again; the agent (38 §6) calls a tool, waits for a person across a SIGKILL, is approved from the CLI, streams its answer and refunds once", async () => {
  const demo = spawnTsx(fileURLToPath(new URL("../../cluster/demo.ts", import.meta.url)), [], { name: "demo" });
  const exit = await Promise.race([demo.exited, new Promise<"budget">((r) => setTimeout(() => r("budget"), 60_000))]);
  if (exit === "budget") await demo.kill();
  const output = demo.lines.join("\n");
  expect(exit, demo.lines.slice(-30).join("\n")).toMatchObject({ code: 0 });
  expect(output).toMatch(/SIGKILL the node/);
  expect(output).toMatch(/status\s+succeeded/);
  expect(output).toMatch(/repeated work\s+none/);
  const agent = output.slice(output.indexOf("▶ an agent"));
  expect(agent).toMatch(/effect_observed agent lookup_order/);
  expect(agent).toMatch(/SIGKILL the node while the refund waits for a person/);
  expect(agent).toMatch(/runway approvals approve \S+\n\s+decided/);
  expect(agent).toMatch(/text_delta/);
  expect(agent).toMatch(/agent summary\n.*\n\s+status\s+succeeded/);
  expect(agent).toMatch(/model turns\s+3,/);
  expect(agent).toMatch(/refunds\s+1 — applied once/);
});
