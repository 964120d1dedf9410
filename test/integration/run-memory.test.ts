import { expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { RUN_KIND, RunMemories } from "../../actors/index.js";
import { RUN_RECORD } from "../../actors/run/actor.js";
import { readActor } from "../../runtime/index.js";
import type { RunContext } from "../../machines/index.js";
import { kvSubject, partitionBucket, partitionOf, partitionStream } from "../../runtime/index.js";
import { waitFor } from "../harness/index.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * A run's memory (its input and outputs, folded from its journal) as recovery fills it: the
 * journal read that tells recovery whether a run is live also keeps its facts, so the run's
 * `run.recover` does not read the journal again.
 */
const world = workflowWorld({ name: "memory-node", sweepIntervalMs: false });

it("recall reads a run's journal once, answers its last record and keeps its facts: the run's next decision reads nothing", async () => {
  expect(
    (
      await world.client.putDefinition({
        name: "step-then-nap",
        nodes: [
          { id: "a", kind: "code", handler: "noop" },
          { id: "s", kind: "sleep", duration_ms: 3_600_000, needs: ["a"] },
        ],
      })
    ).outcome,
  ).toMatch(/published|unchanged/);
  const started = await world.client.startRun({ definition: "step-then-nap", input: { topic: "recall" } });
  expect(started.outcome, JSON.stringify(started)).toBe("started");
  const id = (started.run as RunAnswer).id;
  const head = await waitFor(
    async () => {
      const read = await readActor({ nc: world.nc, partitions: 32 }, RUN_RECORD, id);
      const run = read.outcome === "found" ? read.snapshot.context?.run : undefined;
      return run?.nodes["a"]?.s === "succeeded" ? run : undefined;
    },
    { timeoutMs: 10_000, describe: "the run's first step to succeed" },
  );

  const memories = new RunMemories({ nc: world.nc, partitions: 32, kind: RUN_KIND });
  const recalled = await memories.recall(id);
  expect(recalled.outcome).toBe("read");
  const last = recalled.outcome === "read" ? (recalled.last?.snapshot as { context?: { run?: RunContext } }).context?.run : undefined;
  expect(last?.lifecycle.status).toBe(head.lifecycle.status);
  expect(last?.nodes["a"]?.s).toBe("succeeded");

  // With the journal gone from the store, only what recall kept can answer.
  const p = partitionOf(id, 32);
  await (await jetstreamManager(world.nc)).streams.purge(partitionStream(p), { filter: kvSubject(partitionBucket(p), `${RUN_KIND}.${id}`) });
  const memory = await memories.of(head as RunContext);
  expect(memory.input).toEqual({ topic: "recall" });
  // A copy that did not recall it reads the journal, finds nothing, and says so.
  await expect(new RunMemories({ nc: world.nc, partitions: 32, kind: RUN_KIND }).of(head as RunContext)).rejects.toThrow(/journal/);
});
