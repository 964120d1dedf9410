import { expect, it } from "vitest";
import { MailboxClient } from "../../runtime/index.js";
import { DEFAULT_TOPOLOGY } from "../../runtime/topology.js";
import { waitFor } from "../harness/index.js";
import { readActor } from "../fixtures/read-actor.js";
import { fenceOwners, singleServerWorld, startNodeProcess } from "./node-process.js";

const P = DEFAULT_TOPOLOGY.partitions;
const LEASE_TTL_MS = 3_000;
const world = singleServerWorld();

it("partition takeover: after SIGKILL of one of two nodes, the survivor owns all 32 partitions within lease TTL + margin and finishes the dead node's pending commands", async () => {
  const a = await startNodeProcess([world.server.url], { name: "node-a", leaseTtlMs: LEASE_TTL_MS });
  const b = await startNodeProcess([world.server.url], { name: "node-b", leaseTtlMs: LEASE_TTL_MS });
  world.children.push(a, b);
  const split = await waitFor(
    async () => {
      const owners = await fenceOwners(world.nc, P);
      const na = owners.filter((o) => o.owner === "node-a").length;
      const nb = owners.filter((o) => o.owner === "node-b").length;
      return na + nb === P && na > 0 && nb > 0 ? { na, nb } : undefined;
    },
    { timeoutMs: 20_000, describe: "both nodes to own a share of the partitions" },
  );
  console.log(`partition split before the kill: node-a ${split.na}, node-b ${split.nb}`);

  const mailbox = new MailboxClient(world.nc, P);
  const counters = 200;
  const perCounter = 3;
  const sends: Promise<unknown>[] = [];
  for (let round = 0; round < perCounter; round++) {
    for (let i = 0; i < counters; i++) sends.push(mailbox.send({ kind: "counter", id: `c${i}` }, { type: "inc" }, `r${round}-c${i}`));
  }
  await Promise.all(sends);
  const killedAt = Date.now();
  await a.kill("SIGKILL");

  await waitFor(async () => (await fenceOwners(world.nc, P)).every((o) => o.owner === "node-b"), {
    timeoutMs: LEASE_TTL_MS + 15_000,
    describe: "node-b to own every partition",
  });
  const tookMs = Date.now() - killedAt;
  console.log(`survivor owned all ${P} partitions ${tookMs} ms after the SIGKILL (lease TTL ${LEASE_TTL_MS} ms)`);
  // TTL, plus the server's expiry tick, plus one reconcile pass: well under two TTLs.
  expect(tookMs).toBeLessThan(LEASE_TTL_MS + 5_000);

  await waitFor(
    async () => {
      for (let i = 0; i < counters; i++) if ((await readActor(world.nc, "counter", `c${i}`))?.context.count !== perCounter) return false;
      return true;
    },
    { timeoutMs: 30_000, describe: "every pending command to be applied by the survivor" },
  );
  for (let i = 0; i < counters; i += 37) expect((await readActor(world.nc, "counter", `c${i}`))?.transitions).toBe(perCounter);
});
