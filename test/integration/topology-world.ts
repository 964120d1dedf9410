import { afterAll, beforeAll } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { DEFAULT_TOPOLOGY, ensureTopology } from "../../runtime/topology.js";
import { startServer, type NatsServerHandle } from "../harness/index.js";

/** One server with Runway's streams and buckets, and a connection to it, for a test file's tests. */
export function topologyWorld(): { readonly server: NatsServerHandle; readonly nc: NatsConnection } {
  const world = { server: undefined as unknown as NatsServerHandle, nc: undefined as unknown as NatsConnection };
  beforeAll(async () => {
    world.server = await startServer();
    world.nc = await connect(world.server.connectOptions());
    await ensureTopology(world.nc, DEFAULT_TOPOLOGY);
  });
  afterAll(async () => {
    await world.nc?.close();
    await world.server?.dispose();
  });
  return world;
}
