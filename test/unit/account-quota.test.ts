import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { expect, it } from "vitest";
import { setAccountFileQuota, startServer } from "../harness/index.js";

// The soak's storage-quota fault (docs/soak.md): the RUNWAY account's file quota set below what
// the server stores refuses writes; lifted, writes are stored again (the fault is reversible).
it("a server's account quota set below its usage refuses writes, and lifting it lets them through", async () => {
  const server = await startServer();
  const nc = await connect(server.connectOptions());
  try {
    const jsm = await jetstreamManager(nc);
    const js = jetstream(nc);
    await jsm.streams.add({ name: "Q", subjects: ["q.>"] });
    const body = new Uint8Array(4_096);
    expect((await js.publish("q.a", body)).seq).toBe(1);

    await setAccountFileQuota(server, "1K");
    await expect(js.publish("q.a", body)).rejects.toThrow(/resource limits exceeded for account/);

    await setAccountFileQuota(server, undefined);
    expect((await js.publish("q.a", body)).seq).toBe(2);
  } finally {
    await nc.close();
    await server.dispose();
  }
});
