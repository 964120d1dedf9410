// Issue 38 acceptance 6: live tokens. An agent's model streams its text in pieces; each is a
// `text_delta` event published live and never journaled. A follower that joins mid-run reads the
// journal, then sees every delta from then on, in order, then `run_succeeded`. Over A2A (issue 39
// §1), a streaming send carries them as artifact updates.
import { SendMessageRequest, TaskState, type StreamResponse } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { beforeAll, expect, it } from "vitest";
import { followRun, type FollowedEvent } from "../../cluster/follow.js";
import { waitFor } from "../harness/index.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "agent-live", http: { port: 0 } });
/** About 1,000 characters: coalesced at 200, it comes as five deltas or more. */
const TEXT = Array.from({ length: 12 }, (_, i) => `Lyon, part ${i}: a city in France where the Rhone meets the Saone.`).join(" ");

beforeAll(async () => {
  // One turn that answers after 3 s (time for a follower to join), streamed in pieces of about 8 characters.
  const script = { turns: [{ text: TEXT, usage: { input_tokens: 10, output_tokens: 20 }, delay_ms: 3_000 }], chunk_chars: 8 };
  expect((await world.client.putModelProvider({ name: "slow", kind: "scripted", script })).outcome).toBe("created");
  const def = { name: "live-slow", nodes: [{ id: "ask", kind: "agent", model: "slow/m1", instructions: "Answer.", input: "${input.q}", tools: [] }] };
  expect((await world.client.putDefinition(def)).outcome).toMatch(/published|unchanged/);
}, 30_000);

it("38.6 a follower that joins mid-run sees every text_delta of the turn in flight, in order, then run_succeeded; none is journaled", async () => {
  const c = world.client;
  const started = await c.startRun({ definition: "live-slow", input: { q: "Where is Lyon?" } });
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
  // Coalesced: the scripted model streams ~8-character pieces, the deltas hold 200 characters or more each but the last.
  expect(deltas.length).toBeGreaterThanOrEqual(4);
  expect(deltas.slice(0, -1).every((d) => String(d.text).length >= 200)).toBe(true);
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

it("39.1 an A2A streaming send of an agent carries its live tokens as artifact updates, appended in order, before the result and the completed state", async () => {
  expect((await world.client.exposeAgent({ definition: "live-slow", public: true })).outcome).toBe("exposed");
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ["JSONRPC"] }));
  const client = await factory.createFromUrl(`${world.node.httpUrl}/a2a/t1/live-slow/`);
  const request = SendMessageRequest.fromJSON({ message: { messageId: `live-${process.pid}`, role: "ROLE_USER", parts: [{ data: { q: "Where is Lyon?" } }] } });
  const events: StreamResponse[] = [];
  for await (const e of client.sendMessageStream(request)) events.push(e);
  const updates = events.flatMap((e) => (e.payload?.$case === "artifactUpdate" ? [e.payload.value] : []));
  const tokens = updates.filter((u) => u.artifact?.artifactId === "text/ask/1/0");
  expect(tokens.length).toBeGreaterThanOrEqual(4);
  expect(tokens.map((u) => u.append)).toEqual(tokens.map((_, i) => i > 0));
  expect(tokens.map((u) => u.artifact!.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("")).join("")).toBe(TEXT);
  const order = updates.map((u) => u.artifact?.artifactId);
  expect(order.indexOf("result")).toBeGreaterThan(order.lastIndexOf("text/ask/1/0"));
  const last = events.at(-1)!.payload;
  expect(last?.$case === "statusUpdate" && last.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
});
