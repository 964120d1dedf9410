// Issue 38 acceptance 6: live tokens. An agent's model streams its text in pieces; each is a
// `text_delta` event published live and never journaled. A follower that joins mid-run reads the
// journal, then sees every delta from then on, in order, then `run_succeeded`.
import { expect, it } from "vitest";
import { followRun, type FollowedEvent } from "../../cluster/follow.js";
import { waitFor } from "../harness/index.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "agent-live" });
const TEXT = "Lyon is a city in France, at the confluence of the Rhone and the Saone rivers.";

it("38.6 a follower that joins mid-run sees every text_delta of the turn in flight, in order, then run_succeeded; none is journaled", async () => {
  const c = world.client;
  // One turn that answers after 3 s, streamed in pieces of about 8 characters.
  const script = { turns: [{ text: TEXT, usage: { input_tokens: 10, output_tokens: 20 }, delay_ms: 3_000 }], chunk_chars: 8 };
  expect((await c.putModelProvider({ name: "slow", kind: "scripted", script })).outcome).toBe("created");
  const def = { name: "live", nodes: [{ id: "ask", kind: "agent", model: "slow/m1", instructions: "Answer.", input: "${input.q}", tools: [] }] };
  expect((await c.putDefinition(def)).outcome).toMatch(/published|unchanged/);
  const started = await c.startRun({ definition: "live", input: { q: "Where is Lyon?" } });
  const run = (started.run as RunAnswer).id;
  // Mid-run: the journal already holds the run's start while the turn is being asked.
  await waitFor(
    async () => {
      const page = await c.runEvents(run);
      return (page.events as FollowedEvent[]).some((e) => e.type === "run_started") || undefined;
    },
    { timeoutMs: 10_000, describe: "run_started in the journal" },
  );
  const seen: FollowedEvent[] = [];
  for await (const e of followRun(world.nc, c, "t1", run, { pollMs: 500 })) seen.push(e);

  const deltas = seen.filter((e) => e.type === "text_delta");
  expect(deltas.length).toBeGreaterThan(3);
  expect(deltas.map((d) => d.seq)).toEqual(deltas.map((_, i) => i));
  expect(deltas.map((d) => d.text).join("")).toBe(TEXT);
  expect(deltas.every((d) => d.node === "ask" && d.turn === 0 && d.attempt === 1 && d.id === undefined)).toBe(true);
  const types = seen.map((e) => e.type);
  expect(types.indexOf("run_succeeded")).toBeGreaterThan(types.lastIndexOf("text_delta"));
  expect(types.at(-1)).toBe("run_succeeded");

  const journal = await c.runEvents(run);
  expect((journal.events as FollowedEvent[]).some((e) => e.type === "text_delta")).toBe(false);
  expect((await world.settled(run)).result).toEqual({ ask: TEXT });
});
