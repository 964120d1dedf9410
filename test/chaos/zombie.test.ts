import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { MailboxClient, partitionOf, partitionStream } from "../../runtime/index.js";
import { DEFAULT_TOPOLOGY } from "../../runtime/topology.js";
import { placementFor } from "../../runtime/partitions/placement.js";
import { waitFor } from "../harness/index.js";
import { readActor } from "../fixtures/read-actor.js";
import { fenceOwners, singleServerWorld, startNodeProcess } from "./node-process.js";

const P = DEFAULT_TOPOLOGY.partitions;
const LEASE_TTL_MS = 3_000;
const world = singleServerWorld();
const dir = mkdtempSync(join(tmpdir(), "runway-zombie-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("zombie fenced: a node paused past its lease and resumed after takeover lands no write under its old epoch", async () => {
  const nodes = ["zombie-a", "zombie-b"];
  const aPartitions = placementFor("zombie-a", nodes, P);
  let probe = "";
  for (let i = 0; !probe; i++) if (aPartitions.includes(partitionOf(`probe${i}`, P))) probe = `probe${i}`;
  const releaseFile = join(dir, "release");

  const a = await startNodeProcess([world.server.url], {
    name: "zombie-a",
    leaseTtlMs: LEASE_TTL_MS,
    holdBeforeWrite: { key: `counter.${probe}`, file: releaseFile },
  });
  const b = await startNodeProcess([world.server.url], { name: "zombie-b", leaseTtlMs: LEASE_TTL_MS });
  world.children.push(a, b);
  await waitFor(async () => (await fenceOwners(world.nc, P)).every((o, p) => o.owner === (aPartitions.includes(p) ? "zombie-a" : "zombie-b")), {
    timeoutMs: 20_000,
    describe: "placement to settle",
  });
  const before = await fenceOwners(world.nc, P);

  // zombie-a takes a command and stops right before its state write...
  const mailbox = new MailboxClient(world.nc, P);
  await mailbox.send({ kind: "counter", id: probe }, { type: "inc" }, "probe-1");
  await a.waitForLine(new RegExp(`^HOLDING counter\\.${probe}`), { timeoutMs: 10_000 });
  // ...and is frozen there, with more of its partitions' commands queued behind it.
  await a.pause();
  for (let i = 0; i < 50; i++) {
    let id = "";
    for (let j = i * 1000; !id; j++) if (aPartitions.includes(partitionOf(`q${j}`, P))) id = `q${j}`;
    await mailbox.send({ kind: "counter", id }, { type: "inc" }, `queued-${i}`);
  }

  await waitFor(async () => (await fenceOwners(world.nc, P)).every((o) => o.owner === "zombie-b"), {
    timeoutMs: LEASE_TTL_MS + 15_000,
    describe: "zombie-b to take every partition",
  });
  const takeover = await fenceOwners(world.nc, P);
  // zombie-b applies the held command itself.
  await waitFor(async () => (await readActor(world.nc, "counter", probe))?.context.count === 1, {
    timeoutMs: 15_000,
    describe: "zombie-b to apply the probe command",
  });

  // Wake the zombie: its pending write, made under its old epoch, must be refused.
  writeFileSync(releaseFile, "go");
  a.resume();
  await a.waitForLine(/^RELEASED /, { timeoutMs: 10_000 });
  await a.waitForLine(/write refused: partition fenced/, { timeoutMs: 15_000 });

  // Proof that none landed: no record written after the takeover carries zombie-a's old epoch.
  const jsm = await jetstreamManager(world.nc);
  let scanned = 0;
  for (const p of aPartitions) {
    const oldWriter = `zombie-a/${before[p]!.epoch}`;
    const last = (await jsm.streams.info(partitionStream(p))).state.last_seq;
    for (let seq = takeover[p]!.epoch + 1; seq <= last; seq++) {
      const m = await jsm.streams.getMessage(partitionStream(p), { seq }).catch(() => null);
      if (!m) continue;
      scanned++;
      expect(m.header?.get("Rw-Writer")).not.toBe(oldWriter);
    }
  }
  console.log(`zombie fenced: scanned ${scanned} records written after takeover in ${aPartitions.length} partitions; none under zombie-a's old epochs`);
  expect((await readActor(world.nc, "counter", probe))?.context.count).toBe(1);
  expect(existsSync(releaseFile)).toBe(true);
});
