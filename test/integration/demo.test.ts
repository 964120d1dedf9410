import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { spawnTsx } from "../harness/index.js";

it("npm run demo completes within its time budget: the run survives a SIGKILL and no completed step runs again", async () => {
  const demo = spawnTsx(fileURLToPath(new URL("../../cluster/demo.ts", import.meta.url)), [], { name: "demo" });
  const exit = await Promise.race([demo.exited, new Promise<"budget">((r) => setTimeout(() => r("budget"), 60_000))]);
  if (exit === "budget") await demo.kill();
  const output = demo.lines.join("\n");
  expect(exit, demo.lines.slice(-30).join("\n")).toMatchObject({ code: 0 });
  expect(output).toMatch(/SIGKILL the node/);
  expect(output).toMatch(/status\s+succeeded/);
  expect(output).toMatch(/repeated work\s+none/);
});
