import { expect, it } from "vitest";
import { workflowWorld } from "./workflow-support.js";

/**
 * Issue 37 §6: creating a tenant that already exists answers `exists` (a closed answer, with the
 * tenant as it is), never a fault, whenever it is asked: at once, concurrently, and once the
 * tenant has applied many other commands since.
 */
const world = workflowWorld({ name: "tenant-create-node", sweepIntervalMs: false });

it("a second create of a tenant answers `exists` at once, through the API, and leaves its settings as they were", async () => {
  const first = await world.client.createTenant("twice", { max_concurrency: 7 });
  expect(first).toMatchObject({ outcome: "created", tenant: { id: "twice" } });
  const second = await world.client.createTenant("twice", { max_concurrency: 3 });
  expect(second).toMatchObject({ outcome: "exists", tenant: { id: "twice", settings: { max_concurrency: 7 } } });
  expect(await world.client.createTenant("twice")).toMatchObject({ outcome: "exists" });
});

it("creates of one tenant sent together: one answers `created`, every other `exists`", async () => {
  const answers = await Promise.all(Array.from({ length: 5 }, () => world.node.tenants.create("together")));
  expect(answers.map((a) => a.outcome).sort()).toEqual(["created", "exists", "exists", "exists", "exists"]);
});

it("a create after the tenant applied many other commands still answers `exists`", async () => {
  const tenants = world.node.tenants;
  expect((await tenants.create("later", { max_concurrency: 100 })).outcome).toBe("created");
  for (let i = 0; i < 40; i++) expect((await tenants.admit("later", `later_r${i}`, "p")).outcome).toBe("admitted");
  expect(await tenants.create("later")).toMatchObject({ outcome: "exists", tenant: { id: "later" } });
});
