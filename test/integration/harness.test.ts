// Proves the harness against real processes: nats-server (single and clustered), the nats CLI,
// and generic child processes, including that nothing is left running afterwards.
import { afterAll, describe, expect, it } from "vitest";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { killAll, livePids, natsCli, spawnProcess, startCluster, startServer, waitFor } from "../harness/index.js";

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Puts `key` once a stream leader takes the write: until one is elected a publish meets no responder, which the client reports as "jetstream is not enabled". */
async function putOnceLed(kv: KV, key: string, value: string, describe: string): Promise<void> {
  await waitFor(
    () =>
      kv.put(key, value).catch((err: unknown) => {
        if (/jetstream is not enabled|no responders/i.test(String((err as Error).message))) return undefined;
        throw err;
      }),
    { timeoutMs: 20_000, describe },
  );
}

async function withConnection<T>(opts: Parameters<typeof connect>[0], fn: (nc: NatsConnection) => Promise<T>): Promise<T> {
  const nc = await connect(opts);
  try {
    return await fn(nc);
  } finally {
    await nc.close();
  }
}

afterAll(async () => {
  await killAll();
});

describe("single nats-server", () => {
  it("serves KV, survives restart/kill/pause, and is gone after dispose", async () => {
    const server = await startServer();
    try {
      expect(server.url).toMatch(/^nats:\/\/127\.0\.0\.1:\d+$/);
      expect(isAlive(server.pid)).toBe(true);

      await withConnection(server.connectOptions(), async (nc) => {
        const kv = await new Kvm(nc).create("cfg");
        await kv.put("greeting", "hello");
        expect((await kv.get("greeting"))?.string()).toBe("hello");
      });

      const ls = await natsCli(server, ["kv", "ls"]);
      expect(ls.code, ls.stderr).toBe(0);
      expect(ls.stdout).toContain("cfg");

      const report = await natsCli(server, ["server", "report", "jetstream"], { sys: true });
      expect(report.code, report.stderr).toBe(0);
      expect(report.stdout).toContain(server.name);

      // graceful restart keeps the store
      const firstPid = server.pid;
      await server.restart();
      expect(server.pid).not.toBe(firstPid);
      expect(isAlive(firstPid)).toBe(false);
      await withConnection(server.connectOptions(), async (nc) => {
        const kv = await new Kvm(nc).open("cfg");
        expect((await kv.get("greeting"))?.string()).toBe("hello");
        await kv.put("greeting", "again");
      });

      // SIGKILL then restart: acknowledged writes are on disk
      await server.kill();
      expect(server.isRunning()).toBe(false);
      await server.restart();
      await withConnection(server.connectOptions(), async (nc) => {
        const kv = await new Kvm(nc).open("cfg");
        expect((await kv.get("greeting"))?.string()).toBe("again");
      });

      // SIGSTOP: the socket stays open but nothing answers; SIGCONT: the same connection works
      await withConnection(server.connectOptions(), async (nc) => {
        const jsm = await jetstreamManager(nc);
        await server.pause();
        expect(server.isPaused()).toBe(true);
        await expect(nc.request("$JS.API.INFO", undefined, { timeout: 300 })).rejects.toThrow(/timeout/i);
        server.resume();
        const info = await waitFor(() => jsm.getAccountInfo(), { timeoutMs: 5000, describe: "account info after resume" });
        expect(info.streams).toBe(1);
      });
    } finally {
      await server.dispose();
    }
    for (const pid of server.pids) expect(isAlive(pid), `pid ${pid}`).toBe(false);
  });
});

describe("3-node cluster", () => {
  it("forms, replicates an R3 KV bucket, rejoins a restarted member, and is gone after dispose", async () => {
    const cluster = await startCluster(3);
    try {
      expect(cluster.servers.map((s) => s.name)).toEqual(["n1", "n2", "n3"]);
      const metaLeader = await cluster.metaLeader();
      expect(metaLeader).toMatch(/^n[123]$/);

      await withConnection({ ...cluster.connectOptions(), reconnectTimeWait: 50 }, async (nc) => {
        // A member's JetStream may report itself a moment after the meta group has a leader: until
        // then placement answers "no suitable peers".
        const kv = await waitFor(
          () =>
            new Kvm(nc).create("orders", { replicas: 3 }).catch((err: unknown) => {
              if (/no suitable peers|peer offline/i.test(String((err as Error).message))) return undefined;
              throw err;
            }),
          { timeoutMs: 20_000, describe: "three JetStream peers to place an R3 bucket" },
        );
        // The new R3 stream answers once its own leader is elected: until then a publish meets no
        // responder, which the client reports as "jetstream is not enabled".
        await putOnceLed(kv, "o1", "placed", "the R3 bucket's stream to elect a leader and take a write");
        expect((await kv.get("o1"))?.string()).toBe("placed");

        const jsm = await jetstreamManager(nc);
        const si = await jsm.streams.info("KV_orders");
        expect(si.config.num_replicas).toBe(3);
        expect(si.cluster?.replicas?.length).toBe(2);

        // Kill a member that leads neither the meta group nor the stream: writes continue with
        // 2 of 3, and no raft election (several seconds) is needed.
        const victim = cluster.servers.find((s) => s.name !== metaLeader && s.name !== si.cluster?.leader);
        if (!victim) throw new Error("no follower to kill");
        await victim.kill();
        // a fresh connection to the survivors: the first one may still be bound to the dead
        // socket and would lose the publish until it notices the disconnect
        const survivors = cluster.servers.filter((s) => s !== victim).map((s) => s.url);
        await withConnection({ ...cluster.connectOptions(), servers: survivors }, async (nc2) => {
          // Under load the stream's leadership may move while its member dies (CI saw "no
          // responders" here once).
          await putOnceLed(await new Kvm(nc2).open("orders"), "o2", "paid", "the survivors to take a write");
        });
        await victim.restart(); // resolves once its healthz is ok, i.e. it caught up
        const after = await jsm.streams.info("KV_orders");
        const replica = after.cluster?.replicas?.find((r) => r.name === victim.name);
        expect(replica?.current).toBe(true);
        expect((await kv.get("o2"))?.string()).toBe("paid");
      });

      const report = await natsCli(cluster, ["server", "report", "jetstream"], { sys: true });
      expect(report.code, report.stderr).toBe(0);
      for (const name of ["n1", "n2", "n3"]) expect(report.stdout).toContain(name);
      expect(cluster.serverByName("n2").name).toBe("n2");
      expect(() => cluster.serverByName("n9")).toThrow(/no server named n9/);
    } finally {
      await cluster.dispose();
    }
    for (const s of cluster.servers) for (const pid of s.pids) expect(isAlive(pid), `${s.name} pid ${pid}`).toBe(false);
  });
});

describe("child processes", () => {
  it("captures lines, waits for a line, reports a missing line, and kills", async () => {
    const child = spawnProcess(process.execPath, ["-e", "console.log('booting'); console.error('ready on 42'); setInterval(() => {}, 1000)"], {
      name: "toy",
    });
    expect(await child.waitForLine(/ready on \d+/, { timeoutMs: 10_000 })).toBe("ready on 42");
    expect(child.lines).toContain("booting");
    await expect(child.waitForLine(/never/, { timeoutMs: 100 })).rejects.toThrow(/toy .*\/never\/.*booting/s);
    const exit = await child.kill();
    expect(exit.signal).toBe("SIGKILL");
    expect(isAlive(child.pid)).toBe(false);

    const quitter = spawnProcess(process.execPath, ["-e", "console.log('bye'); process.exit(3)"], { name: "quitter" });
    await expect(quitter.waitForLine(/never/, { timeoutMs: 10_000 })).rejects.toThrow(/quitter .*exited \(code 3.*bye/s);
  });

  it("leaves no registered process behind", async () => {
    await killAll();
    expect(livePids()).toEqual([]);
  });
});
