import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { RUN_KIND, type StepReport } from "../../actors/index.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const dir = mkdtempSync(join(tmpdir(), "runway-reclaim-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The first result of node `a`, held by the report path until the test hands it on itself. */
let held: { report: StepReport; address: { kind: string; id: string }; event: Record<string, unknown>; id: string; answer(outcome: unknown): void } | undefined;
let heldNow: () => void = () => undefined;
const heldSeen = new Promise<void>((r) => (heldNow = r));

const world = workflowWorld({
  name: "reclaim",
  sweepIntervalMs: false,
  decorate: {
    report: (report) => (address, event, id) => {
      if (held || event.type !== "step.result" || event.node !== "a") return report(address, event, id);
      return new Promise((answer) => {
        held = { report, address, event, id, answer: answer as (outcome: unknown) => void };
        heldNow();
      });
    },
  },
});

it("a recovery decided in the process that holds a run's attempts fails none of them, even one offered by the command decided just before it in the same batch", async () => {
  const ledger = join(dir, "ledger.txt");
  const client = world.clientFor("reclaim");
  await client.createTenant("reclaim");
  const nodes = [
    { id: "a", kind: "code", handler: "count_invocations", input: { file: ledger, value: 1 } },
    { id: "b", kind: "code", handler: "count_invocations", needs: ["a"], input: { file: ledger, value: 2 } },
  ];
  expect((await client.putDefinition({ name: "pair", nodes })).outcome).toBe("published");
  const run = ((await client.startRun({ definition: "pair" })).run as RunAnswer).id;
  await heldSeen;
  // What recovery sends at a partition claim (node.ts claims a partition this process may
  // already serve runs of). The first goes alone into the run's lane; `a`'s result and the
  // second queue behind it and are taken as one batch: the result offers `b` to this node's
  // scheduler (after the write), and the second recovery must not judge before that hand-over.
  const host = world.node.node.host;
  const address = { kind: RUN_KIND, id: run };
  const recover = { type: "run.recover", reason: "partition_claimed" };
  const first = host.dispatch(address, recover, `recover/test/1/${run}`);
  const result = held!.report(held!.address, held!.event, held!.id);
  const second = host.dispatch(address, recover, `recover/test/2/${run}`);
  held!.answer(await result);
  // Neither finds a lost attempt: `a`'s report was still on its way, `b` was offered here.
  expect((await first).outcome).toBe("refused");
  expect((await second).outcome).toBe("refused");
  expect((await world.settled(run, client)).status).toBe("succeeded");
  expect(readFileSync(ledger, "utf8").trim().split("\n").sort()).toEqual([`${run} a 1`, `${run} b 1`]);
  const events = ((await client.runEvents(run)).events ?? []) as { type: string }[];
  expect(events.map((e) => e.type)).not.toContain("step_retrying");
});
