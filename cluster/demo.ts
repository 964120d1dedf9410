/**
 * `npm run demo` — the runtime demo: two nodes share 32 partitions of account actors; 2,000
 * deposits flow in; one node is SIGKILLed halfway; the survivor takes its partitions over and
 * every deposit is applied exactly once.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { actorRecordCodec, kvSubject, MailboxClient, partitionBucket, partitionOf, partitionStream, readFence, readLast } from "../runtime/index.js";
import { startEmbeddedNats } from "./embedded-nats.js";

const here = dirname(fileURLToPath(import.meta.url));
const P = 32;
const say = (s: string) => process.stdout.write(`${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined | false>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`demo: timed out waiting for ${what}`);
    await sleep(50);
  }
}

function startNodeProcess(url: string, name: string): ChildProcess {
  const child = spawn(process.execPath, ["--import", "tsx", join(here, "cli.ts"), "node", "--servers", url, "--name", name, "--actors", join(here, "demo-actors.ts"), "--lease-ttl-ms", "3000"], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, RUNWAY_LOG: "warn" },
  });
  child.stderr?.on("data", (d: Buffer) => process.stderr.write(`  [${name}] ${d}`));
  return child;
}

const dir = mkdtempSync(join(tmpdir(), "runway-demo-"));
const nats = await startEmbeddedNats(dir);
const children: ChildProcess[] = [];
try {
  say(`1. nats-server ${nats.url} (JetStream, store ${dir})`);
  const nc = await connect({ servers: nats.url });
  children.push(startNodeProcess(nats.url, "node-a"), startNodeProcess(nats.url, "node-b"));
  const owners = async () => Promise.all(Array.from({ length: P }, async (_, p) => {
    const f = await readFence(nc, p);
    return f.outcome === "found" ? f.fence.owner : null;
  }));
  const split = await until("both nodes to own partitions", 30_000, async () => {
    const o = await owners();
    const a = o.filter((x) => x === "node-a").length;
    const b = o.filter((x) => x === "node-b").length;
    return a + b === P && a > 0 && b > 0 ? { a, b } : undefined;
  });
  say(`2. two nodes share ${P} partitions: node-a ${split.a}, node-b ${split.b}`);

  const mailbox = new MailboxClient(nc, P);
  const accounts = 100;
  const deposits = 2_000;
  let killedAt = 0;
  for (let i = 0; i < deposits; i++) {
    await mailbox.send({ kind: "account", id: `acct${i % accounts}` }, { type: "deposit", amount: 1 }, `deposit-${i}`);
    if (i === deposits / 2) {
      children[0]!.kill("SIGKILL");
      killedAt = Date.now();
      say(`3. sent ${i} deposits; SIGKILL node-a (pid ${children[0]!.pid})`);
    }
  }
  say(`4. sent all ${deposits} deposits`);
  await until("node-b to own every partition", 30_000, async () => (await owners()).every((o) => o === "node-b"));
  say(`5. node-b owns all ${P} partitions ${Date.now() - killedAt} ms after the kill (lease TTL 3000 ms)`);

  const totals = await until("every deposit to be applied", 30_000, async () => {
    let balance = 0;
    let applied = 0;
    for (let i = 0; i < accounts; i++) {
      const id = `acct${i}`;
      const p = partitionOf(id, P);
      const read = await readLast(nc, partitionStream(p), kvSubject(partitionBucket(p), `account.${id}`));
      if (read.outcome !== "found") return undefined;
      const rec = actorRecordCodec.decode(read.message.data);
      if (!rec.ok) throw new Error(rec.detail);
      const ctx = (rec.value.snapshot as { context: { balance: number; deposits: number } }).context;
      balance += ctx.balance;
      applied += ctx.deposits;
    }
    return applied === deposits ? { balance, applied } : undefined;
  });
  say("");
  say("summary");
  say(`  deposits sent          ${deposits}`);
  say(`  deposits applied       ${totals.applied} (each exactly once: total balance ${totals.balance})`);
  say(`  node killed            node-a, SIGKILL, halfway through`);
  say(`  takeover               node-b owns every partition; no write of node-a's can land after it`);
  await nc.close();
} finally {
  for (const c of children) c.kill("SIGTERM");
  await Promise.all(children.map((c) => (c.exitCode !== null || c.signalCode ? Promise.resolve() : new Promise((r) => c.once("exit", r)))));
  await nats.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
