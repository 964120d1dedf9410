import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { RunwayClient } from "../../cluster/client.js";
import { actorRecordCodec, kvSubject, partitionBucket, partitionOf, partitionStream, readLast, type ActorRecord } from "../../runtime/index.js";
import { DEFAULT_TOPOLOGY } from "../../runtime/topology.js";
import { RECORD_VERSIONS } from "../../actors/records/index.js";
import { repoRoot, waitFor, type ChildHandle } from "../harness/index.js";
import { fenceOwners, singleServerWorld, spawnWorkflowNode } from "./node-process.js";
import type { RunAnswer } from "../integration/workflow-support.js";

/**
 * Issue 41 §2: a rolling upgrade. Version N is this tree as it was just before the run record's
 * current format (the parent of the commit that set `RECORD_VERSIONS.run` to today's value, so the
 * migration table's last step is what carries N's records over when written),
 * checked out as a detached git worktree beside this one and run from its own sources; N+1 is this tree. Two N nodes serve a
 * stream of sequential runs; then, one at a time, an N+1 node joins and an N node is drained by
 * SIGTERM (its partitions handed over, its attempts finished or released) and exits.
 */

const P = DEFAULT_TOPOLOGY.partitions;
const LEASE_TTL_MS = 3_000;
const STEPS = 8;
/** The run record's format N+1 writes, and the one N wrote. */
const NEXT_FORMAT = RECORD_VERSIONS.run;
const N_FORMAT = NEXT_FORMAT - 1;

/** Why the test cannot run here (no git, no history), or the commit of version N and where its tree is. */
function versionN(): { skip: string } | { commit: string; tree: string } {
  const git = (...args: string[]) => spawnSync("git", ["-C", repoRoot, ...args], { encoding: "utf8" });
  const version = git("--version");
  if (version.error || version.status !== 0) return { skip: `git is not available (${version.error?.message ?? version.stderr.trim()})` };
  if (git("rev-parse", "--git-dir").status !== 0) return { skip: `${repoRoot} is not a git checkout` };
  // The commit that made run records today's format; N is its parent, which writes the one before.
  // (A line of the table that sets `run` to today's format, whatever other kinds it lists.)
  const marker = `RECORD_VERSIONS = .*run: ${NEXT_FORMAT}[^0-9]`;
  const bump = git("log", "--reverse", "--format=%H", "-G", marker, "--", "actors/records/migrations.ts").stdout.trim().split("\n")[0];
  if (!bump) return { skip: `no commit in this clone's history sets RECORD_VERSIONS.run to ${NEXT_FORMAT} (a shallow clone?)` };
  const parent = git("rev-parse", "--verify", "--quiet", `${bump}^`);
  const commit = parent.status === 0 ? parent.stdout.trim() : "";
  if (!commit) return { skip: `no parent of ${bump} in this clone (shallow?)` };
  return { commit, tree: join(tmpdir(), `runway-N-${commit.slice(0, 10)}`) };
}

/** Makes (or reuses) the worktree of version N, its node_modules this tree's; fails if N needs a package this tree lacks. */
function checkoutN(commit: string, tree: string): void {
  const git = (...args: string[]) => {
    const r = spawnSync("git", ["-C", repoRoot, ...args], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr.trim()}`);
    return r.stdout.trim();
  };
  const head = existsSync(tree) ? spawnSync("git", ["-C", tree, "rev-parse", "HEAD"], { encoding: "utf8" }).stdout.trim() : "";
  if (head !== commit) {
    rmSync(tree, { recursive: true, force: true });
    git("worktree", "prune");
    git("worktree", "add", "--detach", "--force", tree, commit);
  }
  const modules = realpathSync(join(repoRoot, "node_modules"));
  if (!existsSync(join(tree, "node_modules"))) symlinkSync(modules, join(tree, "node_modules"));
  const pkg = JSON.parse(readFileSync(join(tree, "package.json"), "utf8")) as { dependencies?: object; devDependencies?: object };
  const missing = Object.keys({ ...pkg.dependencies, ...pkg.devDependencies }).filter((d) => !existsSync(join(modules, d, "package.json")));
  if (missing.length > 0) throw new Error(`version N (${commit}) needs packages main's node_modules lacks: ${missing.join(", ")}; pick a newer commit`);
}

const n = versionN();
if ("skip" in n) console.warn(`41.2 rolling upgrade skipped: ${n.skip}`);

const world = singleServerWorld();
const dir = mkdtempSync(join(tmpdir(), "runway-upgrade-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A node of version N: its own cli and fixture handlers, from its worktree. */
function startNodeN(tree: string, name: string): ChildHandle {
  return spawnWorkflowNode(world.server.url, world.children, name, { tree, leaseTtlMs: LEASE_TTL_MS });
}

/** A run's stored record as it lies in its partition (format version, writer), read raw. */
async function storedRun(id: string): Promise<ActorRecord | undefined> {
  const p = partitionOf(id, P);
  const read = await readLast(world.nc, partitionStream(p), kvSubject(partitionBucket(p), `run.${id}`));
  if (read.outcome !== "found") return undefined;
  const decoded = actorRecordCodec.decode(read.message.data);
  return decoded.ok ? decoded.value : undefined;
}

it.skipIf("skip" in n)(
  "41.2 rolling upgrade: N+1 nodes join a cluster of N while runs are in flight, the N nodes are drained one by one by SIGTERM; every run succeeds, no committed step runs again, and the run records N stored in the previous format are read and carried on by N+1 through the migration table",
  async () => {
    if ("skip" in n) return;
    const began = Date.now();
    checkoutN(n.commit, n.tree);
    const old = [startNodeN(n.tree, "old-a"), startNodeN(n.tree, "old-b")];
    await Promise.all(old.map((c) => c.waitForLine(/^READY /, { timeoutMs: 30_000 })));

    const ledger = join(dir, "ledger.txt");
    const client = new RunwayClient(world.nc, "up");
    expect((await client.createTenant("up")).outcome).toMatch(/created|exists/);
    const nodes = Array.from({ length: STEPS }, (_, i) => ({
      id: `s${i}`,
      kind: "code",
      handler: "count_slow",
      input: { file: ledger, value: i, ms: 300 },
      ...(i > 0 ? { needs: [`s${i - 1}`] } : {}),
    }));
    expect((await client.putDefinition({ name: "steps", nodes, result: `\${steps.s${STEPS - 1}.output}` })).outcome).toBe("published");
    // Runs that wait for a signal across the whole upgrade: N stores them `waiting` in its format, N+1 wakes them.
    expect(
      (
        await client.putDefinition({
          name: "held",
          nodes: [
            { id: "go", kind: "wait", signal: "go" },
            { id: "after", kind: "code", handler: "count_slow", needs: ["go"], input: { file: ledger, value: "woke", ms: 0 } },
          ],
          result: "${steps.after.output}",
        })
      ).outcome,
    ).toBe("published");
    const held: string[] = [];
    for (let i = 0; i < 3; i++) held.push(((await client.startRun({ definition: "held" })).run as RunAnswer).id);
    for (const id of held)
      await waitFor(async () => ((await client.getRun(id)).run as RunAnswer).status === "waiting" || undefined, {
        timeoutMs: 20_000,
        describe: `${id} to wait`,
      });
    for (const id of held) expect(await storedRun(id), id).toMatchObject({ version: N_FORMAT, writer: { node: expect.stringMatching(/^old-/) } });

    // The workload: a run started every 150 ms until the last N node is gone; every start must be taken.
    const runs: string[] = [];
    const refused: string[] = [];
    let starting = true;
    const starter = (async () => {
      for (let i = 0; starting; i++) {
        // A start that throws (no answer in time) is a refusal too: the loop goes on, the test fails at the end.
        const s = await client.startRun({ definition: "steps", start_key: { source: "upgrade", delivery_id: `r${i}` } }).catch((err: unknown) => ({
          outcome: "threw",
          reason: String(err),
        }));
        if (s.outcome === "started" && "run" in s) runs.push((s.run as RunAnswer).id);
        else refused.push(JSON.stringify(s).slice(0, 200));
        await new Promise((r) => setTimeout(r, 150));
      }
    })();

    // A monitor: which steps had committed by when (the ledger's length then). A step committed at
    // ledger length L that has an invocation at a later line ran again after its commit.
    const committedAt = new Map<string, number>();
    let watching = true;
    const observe = async () => {
      const length = existsSync(ledger) ? readFileSync(ledger, "utf8").split("\n").length - 1 : 0;
      const views = await Promise.all([...runs].map(async (id) => (await client.getRun(id)).run as RunAnswer | undefined));
      for (const v of views)
        for (const [step, node] of Object.entries(v?.nodes ?? {}))
          if (node.status === "succeeded" && !committedAt.has(`${v!.id} ${step}`)) committedAt.set(`${v!.id} ${step}`, length);
    };
    const monitor = (async () => {
      while (watching) {
        // A read that gets no answer in time (a partition changing hands) only skips a sample.
        await observe().catch(() => undefined);
        await new Promise((r) => setTimeout(r, 200));
      }
    })();

    try {
      // N serves: some runs finished, some in flight. Their records are in N's format, written by N.
      const { inFlightOnN, endedOnN } = await waitFor(
        async () => {
          const views = await Promise.all(runs.map(async (id) => (await client.getRun(id)).run as RunAnswer));
          const live = views.filter((v) => v.status === "running").map((v) => v.id);
          const ended = views.filter((v) => v.status === "succeeded").map((v) => v.id);
          return ended.length > 0 && live.length >= 3 ? { inFlightOnN: live, endedOnN: ended } : undefined;
        },
        { timeoutMs: 30_000, describe: "runs finished and in flight on version N" },
      );
      const writtenByN = new Map<string, ActorRecord>();
      for (const id of inFlightOnN) {
        const r = await storedRun(id);
        if (r) writtenByN.set(id, r);
      }
      for (const [id, r] of writtenByN) {
        expect(r.version, id).toBe(N_FORMAT);
        expect(r.writer.node, id).toMatch(/^old-/);
      }

      // One at a time: an N+1 node joins and takes a share, then an N node drains and exits.
      const next: ChildHandle[] = [];
      const leftByN = new Map<string, ActorRecord>();
      const steps: string[] = [];
      for (const [i, leaving] of old.entries()) {
        const name = `next-${i + 1}`;
        const joined = spawnWorkflowNode(world.server.url, world.children, name, { leaseTtlMs: LEASE_TTL_MS });
        next.push(joined);
        await joined.waitForLine(/^READY /, { timeoutMs: 30_000 });
        await waitFor(async () => (await fenceOwners(world.nc, P)).some((o) => o.owner === name) || undefined, {
          timeoutMs: 20_000,
          describe: `${name} to own a partition`,
        });
        // The runs in flight when the N node leaves, whose records it wrote (N's format): N+1 must read and carry them on.
        const live = (await Promise.all(runs.map(async (id) => (await client.getRun(id)).run as RunAnswer))).filter((v) => v.status === "running");
        for (const { id } of live) {
          const r = await storedRun(id);
          if (r?.writer.node === `old-${"ab"[i]}`) {
            expect(r.version, id).toBe(N_FORMAT);
            leftByN.set(id, r);
          }
        }
        const t0 = Date.now();
        await leaving.kill("SIGTERM");
        const exit = await Promise.race([leaving.exited, new Promise<"hung">((r) => setTimeout(() => r("hung"), 30_000))]);
        expect(exit === "hung" ? "still running after 30 s" : exit.code, `old-${"ab"[i]} to drain and exit`).toBe(0);
        steps.push(`${name} joined, old-${"ab"[i]} drained in ${Date.now() - t0} ms with ${live.length} runs in flight`);
        const owners = await fenceOwners(world.nc, P);
        expect(owners.filter((o) => o.owner === `old-${"ab"[i]}`)).toEqual([]);
      }
      starting = false;
      await starter;

      // Every run finishes on N+1 and succeeds: none failed for the upgrade.
      let last: RunAnswer[] = [];
      const final = await waitFor(
        async () => {
          last = await Promise.all(runs.map(async (id) => (await client.getRun(id)).run as RunAnswer));
          return last.every((v) => v.status === "succeeded" || v.status === "failed") ? last : undefined;
        },
        { timeoutMs: 45_000, describe: "every run to end on version N+1" },
      ).catch(async (err: unknown) => {
        const stuck = last.filter((v) => v?.status !== "succeeded" && v?.status !== "failed");
        const records = await Promise.all(stuck.slice(0, 5).map(async (v) => ({ id: v?.id, status: v?.status, stored: await storedRun(v?.id ?? "") })));
        console.log(`runs not ended: ${stuck.length}; the first, with their stored records' format and writer:`);
        for (const r of records) console.log(`  ${r.id} ${r.status} version ${r.stored?.version} by ${r.stored?.writer.node}`);
        throw err;
      });
      expect(refused).toEqual([]);
      expect(final.filter((v) => v.status !== "succeeded").map((v) => `${v.id} ${v.status} ${v.error?.code ?? ""}`)).toEqual([]);
      for (const v of final) expect(v.result, v.id).toBe(STEPS - 1);

      // N's records were read by N+1: a run N left in flight (N's format) was carried on and ended by N+1 (its format).
      const carried: string[] = [];
      for (const id of leftByN.keys()) {
        const r = await storedRun(id);
        if (r?.version === NEXT_FORMAT && r.writer.node.startsWith("next-")) carried.push(id);
      }
      expect(carried.length, "runs N left in flight that N+1 ended").toBeGreaterThan(0);
      // A run N had ended is still read (its record in N's format, migrated on read) with only N+1 serving.
      for (const id of endedOnN) expect(((await client.getRun(id)).run as RunAnswer).status).toBe("succeeded");
      // The runs N stored waiting are woken on N+1 alone and end, stored in N+1's format.
      for (const id of held) expect((await client.signal(id, "go")).outcome, id).toBe("delivered");
      for (const id of held) {
        const ended = await waitFor(
          async () => {
            const v = (await client.getRun(id)).run as RunAnswer;
            return v.status === "succeeded" || v.status === "failed" ? v : undefined;
          },
          { timeoutMs: 20_000, describe: `held run ${id} to end on N+1` },
        );
        expect(ended, id).toMatchObject({ status: "succeeded", result: "woke" });
        expect(await storedRun(id), id).toMatchObject({ version: NEXT_FORMAT, writer: { node: expect.stringMatching(/^next-/) } });
      }

      watching = false;
      await monitor;
      await observe();
      const lines = readFileSync(ledger, "utf8").trim().split("\n");
      const again: string[] = [];
      for (const [key, at] of committedAt) {
        const later = lines.slice(at).filter((l) => l.startsWith(`${key} `));
        if (later.length > 0) again.push(`${key}: ${later.join(", ")}`);
      }
      expect(again, "committed steps that ran again").toEqual([]);
      // Every step of every run committed, and no attempt of a step ran twice.
      expect(committedAt.size).toBe(runs.length * STEPS);
      const perStep = new Map<string, string[]>();
      for (const l of lines) {
        const [run, step, attempt] = l.split(" ");
        perStep.set(`${run} ${step}`, [...(perStep.get(`${run} ${step}`) ?? []), attempt!]);
      }
      for (const [key, attempts] of perStep) expect(new Set(attempts).size, key).toBe(attempts.length);
      console.log(
        `rolling upgrade N=${n.commit.slice(0, 10)} → N+1: ${steps.join("; ")}; ${runs.length} runs and ${held.length} held, ${lines.length} invocations for ${runs.length * STEPS + held.length} steps ` +
          `(${[...perStep.values()].filter((a) => a.length > 1).length} released attempts run again), ${carried.length} of ${leftByN.size} runs left in flight by N (format ${N_FORMAT}) carried on by N+1 (format ${NEXT_FORMAT}); ${Date.now() - began} ms`,
      );
      for (const c of next) await c.kill("SIGTERM");
    } finally {
      starting = false;
      watching = false;
      await starter.catch(() => undefined);
      await monitor.catch(() => undefined);
    }
  },
);
