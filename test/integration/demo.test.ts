import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { spawnTsx } from "../harness/index.js";

it("npm run demo completes within its time budget and every deposit is applied exactly once", async () => {
  const demo = spawnTsx(fileURLToPath(new URL("../../cluster/demo.ts", import.meta.url)), [], { name: "demo" });
  const exit = await Promise.race([demo.exited, new Promise<"budget">((r) => setTimeout(() => r("budget"), 60_000))]);
  if (exit === "budget") await demo.kill();
  expect(exit, demo.lines.slice(-20).join("\n")).toMatchObject({ code: 0 });
  expect(demo.lines.join("\n")).toMatch(/deposits applied\s+2000 \(each exactly once/);
});
