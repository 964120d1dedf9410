import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "waits-node" });
const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));

type Waiting = RunAnswer & { waiting: { on: string; ref: string } | null };

const approvalFlow = {
  name: "wait-for-signal",
  nodes: [
    {
      id: "decision",
      kind: "wait",
      signal: "legal.approved",
      schema: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" }, note: { type: "string" } } },
      timeout_ms: 3_600_000,
    },
    { id: "after", kind: "code", needs: ["decision"], handler: "echo", input: "${steps.decision.output.note}" },
  ],
};

it("a wait node holds its run waiting on the signal (no worker), refuses data that does not fit its schema, and wakes with the signal's data", async () => {
  const c = world.client;
  expect((await c.putDefinition(approvalFlow)).outcome).toMatch(/published|unchanged/);
  const id = ((await c.startRun({ definition: "wait-for-signal" })).run as RunAnswer).id;
  const waiting = await waitFor(
    async () => {
      const r = (await c.getRun(id)).run as Waiting;
      return r.status === "waiting" ? r : undefined;
    },
    { timeoutMs: 10_000, describe: "the run to wait" },
  );
  expect(waiting.waiting).toMatchObject({ on: "event", ref: "decision" });
  expect(world.node.executor.inFlight).toBe(0);
  expect(await c.signal(id, "legal.approved", { approved: "yes" })).toMatchObject({ outcome: "invalid_input" });
  expect(await c.signal(id, "other.signal", {})).toEqual({ outcome: "run_not_waiting" });
  expect(((await c.getRun(id)).run as RunAnswer).status).toBe("waiting");
  expect(await c.signal(id, "legal.approved", { approved: true, note: "fine by us" })).toEqual({ outcome: "delivered", nodes: ["decision"] });
  const done = await world.settled(id);
  expect(done.status).toBe("succeeded");
  expect(done.result).toMatchObject({ decision: { approved: true }, after: "fine by us" });
  expect(await c.signal(id, "legal.approved", { approved: true })).toEqual({ outcome: "run_not_waiting" });
});

it("a wait that times out fails its node wait_timeout", async () => {
  const c = world.client;
  const def = { name: "wait-short", nodes: [{ id: "w", kind: "wait", signal: "never", timeout_ms: 300 }] };
  expect((await c.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  const run = await world.settled(((await c.startRun({ definition: "wait-short" })).run as RunAnswer).id);
  expect(run.status).toBe("failed");
  expect(run.nodes.w!.error?.code).toBe("wait_timeout");
});

it("bad input: an unknown run, a bad signal name, a wait schema outside the supported subset", async () => {
  const c = world.client;
  expect((await c.signal("t1_nope", "x")).outcome).toBe("run_not_found");
  expect((await c.signal("t1_nope", "bad name!")).outcome).toBe("invalid_input");
  const bad = await c.putDefinition({ name: "wait-bad", nodes: [{ id: "w", kind: "wait", signal: "s", schema: { type: "object", oneOf: [] } }] });
  expect(bad.outcome).toBe("invalid_definition");
  expect(JSON.stringify(bad.errors)).toContain("invalid_input_schema");
});

it("runway run signal delivers from the command line (exit 0), and exits 1 when nothing waits", async () => {
  const c = world.client;
  expect((await c.putDefinition(approvalFlow)).outcome).toMatch(/published|unchanged/);
  const id = ((await c.startRun({ definition: "wait-for-signal" })).run as RunAnswer).id;
  await waitFor(async () => ((await c.getRun(id)).run as RunAnswer).status === "waiting" || undefined, { timeoutMs: 10_000, describe: "the run to wait" });
  const run = async (args: string[]) => {
    const child = spawnTsx(cli, [...args, "--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--tenant", "t1"], {
      name: "runway run signal",
    });
    const exit = await child.exited;
    return { code: exit.code, out: child.lines.join("\n") };
  };
  const sent = await run(["run", "signal", id, "legal.approved", "--data", '{"approved":true,"note":"cli"}']);
  expect(sent.code, sent.out).toBe(0);
  expect(sent.out).toContain('"delivered"');
  expect((await world.settled(id)).result).toMatchObject({ after: "cli" });
  const again = await run(["run", "signal", id, "legal.approved", "--data", '{"approved":true}']);
  expect(again.code, again.out).toBe(1);
  expect(again.out).toContain("run_not_waiting");
});
