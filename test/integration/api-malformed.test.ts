import { expect, it } from "vitest";
import { workflowWorld } from "./workflow-support.js";

const world = workflowWorld();

it("1,000 malformed API requests get typed answers and the node stays up", async () => {
  await world.client.putDefinition({ name: "ok-flow", nodes: [{ id: "a", kind: "code", handler: "noop" }] });
  const big = JSON.stringify({ definition: "ok-flow", input: { blob: "x".repeat(600 * 1024) } });
  const cases: { subject: string; body: string | Uint8Array }[] = [
    { subject: "runway.v1.t1.runs.start", body: "{not json" },
    { subject: "runway.v1.t1.runs.start", body: new Uint8Array([0xff, 0xfe, 0x00]) },
    { subject: "runway.v1.t1.runs.start", body: JSON.stringify({ definition: 42 }) },
    { subject: "runway.v1.t1.runs.start", body: JSON.stringify({ definition: "ok-flow", parent_run_id: "x" }) },
    { subject: "runway.v1.t1.runs.start", body: JSON.stringify({ definition: "ok-flow", start_key: { source: "" } }) },
    { subject: "runway.v1.t1.runs.start", body: big },
    { subject: "runway.v1.t1.runs.start", body: "[]" },
    { subject: "runway.v1.nobody.runs.start", body: JSON.stringify({ definition: "ok-flow" }) },
    { subject: "runway.v1.ops.runs.start", body: JSON.stringify({ definition: "ok-flow" }) },
    { subject: "runway.v1.t1.runs.get", body: JSON.stringify({ run_id: 7 }) },
    { subject: "runway.v1.t1.runs.get", body: JSON.stringify({ run_id: "t2_0000" }) },
    { subject: "runway.v1.t1.runs.cancel", body: JSON.stringify({ run_id: "t1_nope" }) },
    { subject: "runway.v1.t1.definitions.put", body: JSON.stringify({ definition: { name: "x", nodes: [{ id: "a", kind: "teleport" }] } }) },
    { subject: "runway.v1.t1.definitions.put", body: JSON.stringify({ definition: null }) },
    { subject: "runway.v1.t1.definitions.get", body: JSON.stringify({ name: "" }) },
    { subject: "runway.v1.t1.runs.list", body: JSON.stringify({ limit: -1 }) },
    { subject: "runway.v1.ops.tenants.put", body: JSON.stringify({ id: "Not A Tenant!" }) },
  ];
  const outcomes = new Map<string, number>();
  let answered = 0;
  const total = 1_000;
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < total) {
        const c = cases[next++ % cases.length]!;
        const reply = await world.nc.request(c.subject, c.body, { timeout: 10_000 });
        expect(reply.headers?.get("Nats-Service-Error") ?? "", `fault for ${c.subject}`).toBe("");
        const answer = JSON.parse(reply.string()) as { outcome: string };
        expect(typeof answer.outcome).toBe("string");
        outcomes.set(answer.outcome, (outcomes.get(answer.outcome) ?? 0) + 1);
        answered++;
      }
    }),
  );
  expect(answered).toBe(total);
  expect([...outcomes.keys()].sort()).toEqual(
    ["definition_not_found", "input_too_large", "invalid_definition", "invalid_input", "request_too_large", "run_not_found", "tenant_not_found"]
      .filter((o) => outcomes.has(o))
      .sort(),
  );
  expect(outcomes.get("invalid_input")).toBeGreaterThan(0);
  expect(outcomes.get("tenant_not_found")).toBeGreaterThan(0);
  expect(outcomes.get("run_not_found")).toBeGreaterThan(0);
  expect(outcomes.get("request_too_large")).toBeGreaterThan(0);
  // Still serving.
  const started = await world.client.startRun({ definition: "ok-flow" });
  expect(started.outcome).toBe("started");
});
