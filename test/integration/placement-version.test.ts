/**
 * The placement function is versioned (runtime/partitions/placement.ts): a cluster places
 * partitions with the lowest version any live node announces in its liveness record, so a node
 * of the new version beside one from before the change computes the old placement and the two
 * agree on every partition's owner (none released by one and left unclaimed by the other).
 */
import { expect, it } from "vitest";
import { kvSubject, publish, systemClock } from "../../runtime/index.js";
import { Membership } from "../../runtime/partitions/membership.js";
import { NODES_BUCKET } from "../../runtime/topology.js";
import { PLACEMENT_VERSION } from "../../runtime/partitions/placement.js";
import { silentLogger } from "../../runtime/log.js";
import { waitFor } from "../harness/index.js";
import { topologyWorld } from "./topology-world.js";

const world = topologyWorld();

it("a node announces its placement version; with a live node that announces none (an older node) every node places with version 1, and with it gone again with the new one", async () => {
  const membership = new Membership({ nc: world.nc, node: "pv-new", incarnation: "pv-new-1", ttlMs: 5_000, clock: systemClock, logger: silentLogger });
  await membership.start();
  try {
    expect(membership.placementVersion()).toBe(PLACEMENT_VERSION);
    const changes: number[] = [];
    membership.onChange(() => changes.push(membership.placementVersion()));

    // An older node's record, as it wrote it: no `placement`.
    const old = { node: "pv-old", incarnation: "pv-old-1", pid: 1, startedAt: Date.now(), renewedAt: Date.now(), ttlMs: 60_000 };
    const stored = await publish(world.nc, kvSubject(NODES_BUCKET, "node.pv-old"), new TextEncoder().encode(JSON.stringify(old)), { ttl: "60s" });
    expect(stored.outcome).toBe("stored");
    await waitFor(() => (membership.isLive("pv-old") ? true : undefined), { timeoutMs: 5_000, describe: "the older node to be seen" });
    expect(membership.placementVersion()).toBe(1);

    // Restarted on the new version under its name: the cluster moves to the new placement.
    const upgraded = { ...old, incarnation: "pv-old-2", placement: PLACEMENT_VERSION };
    expect((await publish(world.nc, kvSubject(NODES_BUCKET, "node.pv-old"), new TextEncoder().encode(JSON.stringify(upgraded)), { ttl: "60s" })).outcome).toBe(
      "stored",
    );
    await waitFor(() => (membership.placementVersion() === PLACEMENT_VERSION ? true : undefined), { timeoutMs: 5_000, describe: "the upgrade to be seen" });
    // Each change of version woke the ownership loop (its listeners).
    expect(changes).toEqual([1, PLACEMENT_VERSION]);
  } finally {
    await membership.stop();
  }
});
