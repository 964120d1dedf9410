// Issue 39, acceptance 6: `runway creds` output loaded into a real nats-server, a node running
// under its own node key, and the real `nats` CLI with tenant A's and an operator's keys.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers, nkeyAuthenticator, type NatsConnection } from "@nats-io/transport-node";
import { RunwayClient } from "../../cluster/client.js";
import { readSeed, writeCredentials, type CredentialFile } from "../../cluster/creds/index.js";
import { startRunwayNode, type RunwayWorkflowNode } from "../../cluster/runway-node.js";
import { createLogger } from "../../runtime/index.js";
import { natsCli, startServer, waitFor, type NatsCliResult, type NatsServerHandle } from "../harness/index.js";
import { HANDLERS, settled } from "./workflow-support.js";

/** Tenant ta's people: alice reviews for ops, bob reviews nothing. */
const USERS = [
  { tenant: "ta", name: "alice", groups: ["ops"] },
  { tenant: "ta", name: "bob" },
];
const dir = mkdtempSync(join(tmpdir(), "runway-creds-"));
let server: NatsServerHandle;
let node: RunwayWorkflowNode;
let creds: CredentialFile[];
let ncA: NatsConnection;
let clientA: RunwayClient;
const opened: NatsConnection[] = [];

const cred = (role: string, name: string) => {
  const c = creds.find((x) => x.role === role && x.name === name && !x.user);
  if (!c) throw new Error(`no ${role} ${name}`);
  return c;
};
const as = (role: string, name: string) => ({ auth: ["--nkey", cred(role, name).path], timeoutMs: 20_000 });
const A = () => as("tenant", "ta");
const OPERATOR = () => as("operator", "ops1");
const cli = (args: string[], who: { auth: string[] }) => natsCli(server, ["--timeout", "2s", ...args], who);
const said = (r: NatsCliResult) => `${r.stdout}\n${r.stderr}`;

async function connectAs(c: CredentialFile): Promise<NatsConnection> {
  const nc = await connect({ servers: [server.url], authenticator: nkeyAuthenticator(new TextEncoder().encode(readSeed(c.path))) });
  opened.push(nc);
  return nc;
}

/** The server refused it: the CLI heard the permissions violation, and the server logged it against tenant A's key. */
async function expectRefused(r: NatsCliResult, kind: "Publish" | "Subscription", subject: string): Promise<void> {
  expect(said(r)).toContain(`Permissions Violation for ${kind} to "${subject}"`);
  const who = `TENANT_ta/nkey:${cred("tenant", "ta").publicKey}`;
  await waitFor(() => readFileSync(server.logPath, "utf8").includes(`"${who}" - ${kind} Violation - Subject "${subject}"`), {
    timeoutMs: 5_000,
    describe: `the server to log the ${kind} violation on ${subject}`,
  });
}

/** SIGHUP, resolved once the server has logged that it reloaded. */
async function reload(): Promise<void> {
  const count = () => readFileSync(server.logPath, "utf8").split("Reloaded server configuration").length;
  const before = count();
  process.kill(server.pid, "SIGHUP");
  await waitFor(() => count() > before, { timeoutMs: 10_000, describe: "the server to reload its config" });
}

beforeAll(async () => {
  const written = writeCredentials(dir, {
    tenants: ["ta", "tb"],
    users: USERS,
    operators: ["ops1"],
    nodes: ["node-a"],
  });
  if (written.outcome !== "ok") throw new Error(written.problems.join("; "));
  creds = written.credentials;
  const nodeSeed = readSeed(cred("node", "node-a").path);
  server = await startServer({
    auth: { config: readFileSync(written.authConfig, "utf8"), ready: { authenticator: nkeyAuthenticator(new TextEncoder().encode(nodeSeed)) } },
  });
  node = await startRunwayNode({
    connection: { servers: [server.url], nkeySeed: nodeSeed },
    name: "node-a",
    handlers: [HANDLERS],
    logger: createLogger("node-a", "error"),
    credentialsDir: dir,
  });
  await waitFor(() => node.node.host.ownedPartitions().length === 32, { timeoutMs: 30_000, describe: "the node to own all partitions" });
  const operator = new RunwayClient(await connectAs(cred("operator", "ops1")), "ops");
  for (const t of ["ta", "tb"]) expect((await operator.createTenant(t)).outcome).toBe("created");
  ncA = await connectAs(cred("tenant", "ta"));
  clientA = new RunwayClient(ncA, "ta");
  expect((await clientA.putDefinition({ name: "one", nodes: [{ id: "a", kind: "code", handler: "noop" }] })).outcome).toBe("published");
});

afterAll(async () => {
  for (const nc of opened) await nc.close().catch(() => {});
  await node?.stop();
  await server?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe("identity over NATS reaches decisions (acceptance 7)", () => {
  const user = (name: string) => {
    const c = creds.find((x) => x.role === "tenant" && x.name === "ta" && x.user === name);
    if (!c) throw new Error(`no user ta:${name}`);
    return c;
  };
  const GATED = {
    name: "gated",
    nodes: [
      { id: "gate", kind: "approval", prompt: "Ship it?", group: "ops", timeout_ms: 3_600_000 },
      { id: "after", kind: "code", needs: ["gate"], handler: "noop" },
    ],
  };
  type View = { id: string; lane: string; initiator?: string; status: string };

  it("a tenant key is the run's initiator and a batch caller: source cli it writes does not give it the interactive lane (C037)", async () => {
    const bob = new RunwayClient(await connectAs(user("bob")), "ta");
    const started = await bob.startRun({ definition: "one", source: "cli" });
    expect(started.outcome, JSON.stringify(started)).toBe("started");
    const view = (await bob.getRun((started.run as View).id)).run as View;
    expect(view).toMatchObject({ lane: "batch", initiator: "nats:ta/bob" });
    // The operator (staff, no tenant import) writing the same source still gets the CLI's lane.
    const operator = new RunwayClient(await connectAs(cred("operator", "ops1")), "ta");
    const staff = (await operator.startRun({ definition: "one", source: "cli" })).run as View;
    expect(((await operator.getRun(staff.id)).run as View).lane).toBe("interactive");
  });

  it("an approval decided by a key outside its reviewer group answers not_authorized, whatever `by` it writes; a reviewer of the group decides it as itself", async () => {
    const alice = new RunwayClient(await connectAs(user("alice")), "ta");
    const bob = new RunwayClient(await connectAs(user("bob")), "ta");
    expect(["published", "unchanged"]).toContain((await bob.putDefinition(GATED)).outcome);
    const run = (await bob.startRun({ definition: "gated" })).run as View;
    const id = `${run.id}:gate`;
    await waitFor(async () => (await bob.approval(id)).outcome === "found" || undefined, { timeoutMs: 10_000, describe: "the approval in the inbox" });
    const refused = await bob.decide(id, "approve", { by: "nats:ta/alice" });
    expect(refused).toMatchObject({ outcome: "not_authorized" });
    expect(String(refused.reason)).toContain("nats:ta/bob is not in the approval's reviewer group ops");
    expect(await alice.decide(id, "approve", { by: "someone-else" })).toMatchObject({ outcome: "decided" });
    expect((await settled(alice, run.id)).status).toBe("succeeded");
  });

  it("the initiator of a run cannot approve its own action, even in the reviewer group; it may reject it", async () => {
    const alice = new RunwayClient(await connectAs(user("alice")), "ta");
    expect(["published", "unchanged"]).toContain((await alice.putDefinition(GATED)).outcome);
    const run = (await alice.startRun({ definition: "gated" })).run as View;
    const id = `${run.id}:gate`;
    await waitFor(async () => (await alice.approval(id)).outcome === "found" || undefined, { timeoutMs: 10_000, describe: "the approval in the inbox" });
    const refused = await alice.decide(id, "approve");
    expect(refused).toMatchObject({ outcome: "not_authorized" });
    expect(String(refused.reason)).toContain("its initiator cannot approve");
    expect(await alice.decide(id, "reject", { reason: "not mine to ship" })).toMatchObject({ outcome: "decided" });
    expect((await settled(alice, run.id)).status).toBe("failed");
  });
});

describe("per-tenant NATS credentials (acceptance 6)", () => {
  it("tenant A's own requests work: through its own client and the nats CLI", async () => {
    const started = await clientA.startRun({ definition: "one" });
    expect(started.outcome).toBe("started");
    const runId = (started.run as { id: string }).id;
    expect((await settled(clientA, runId)).status).toBe("succeeded");
    const listed = await cli(["req", "runway.v1.ta.runs.list", "{}", "--raw"], A());
    expect(listed.code, said(listed)).toBe(0);
    expect(JSON.parse(listed.stdout)).toMatchObject({ outcome: "ok" });
    expect(listed.stdout).toContain(runId);
    const events = await cli(["req", "runway.v1.ta.runs.events", JSON.stringify({ run_id: runId }), "--raw"], A());
    expect(JSON.parse(events.stdout)).toMatchObject({ outcome: "events" });
    expect(events.stdout).toContain("run_succeeded");
  });

  it("tenant A hears its own live events", async () => {
    const heard = cli(["sub", "rw.evt.ta.>", "--count", "1"], A());
    let done = false;
    void heard.finally(() => (done = true));
    // The subscription is made some time after the CLI starts: runs are started until it hears one.
    await waitFor(
      async () => {
        if (done) return true;
        await clientA.startRun({ definition: "one" });
        await new Promise((r) => setTimeout(r, 300));
        return done;
      },
      { timeoutMs: 20_000, describe: "the CLI to hear an event of tenant A" },
    );
    const r = await heard;
    expect(r.code, said(r)).toBe(0);
    expect(said(r)).toMatch(/Received on "rw\.evt\.ta\./);
  });

  it("tenant A cannot request tenant B's or the operators' subjects", async () => {
    await expectRefused(await cli(["req", "runway.v1.tb.runs.list", "{}"], A()), "Publish", "runway.v1.tb.runs.list");
    await expectRefused(await cli(["req", "runway.v1.tb.runs.start", '{"definition":"one"}'], A()), "Publish", "runway.v1.tb.runs.start");
    await expectRefused(await cli(["req", "runway.v1.ops.tenants.list", "{}"], A()), "Publish", "runway.v1.ops.tenants.list");
    // Nor forge its way in through Runway's internal subjects.
    await expectRefused(await cli(["pub", "rw.cmd.0.run.x", "{}"], A()), "Publish", "rw.cmd.0.run.x");
  });

  it("tenant A cannot subscribe to tenant B's events, anyone's replies or Runway's internals", async () => {
    await expectRefused(await cli(["sub", "rw.evt.tb.>", "--count", "1"], A()), "Subscription", "rw.evt.tb.>");
    await expectRefused(await cli(["sub", "rw.evt.>", "--count", "1"], A()), "Subscription", "rw.evt.>");
    await expectRefused(await cli(["sub", "_R_.>", "--count", "1"], A()), "Subscription", "_R_.>");
    await expectRefused(await cli(["sub", "$KV.>", "--count", "1"], A()), "Subscription", "$KV.>");
  });

  it("tenant A cannot read KV buckets or streams", async () => {
    await expectRefused(await cli(["kv", "get", "rw_nodes", "node.node-a"], A()), "Publish", "$JS.API.STREAM.INFO.KV_rw_nodes");
    await expectRefused(await cli(["kv", "ls"], A()), "Publish", "$JS.API.STREAM.LIST");
    await expectRefused(await cli(["stream", "info", "RUNWAY_AUDIT"], A()), "Publish", "$JS.API.STREAM.INFO.RUNWAY_AUDIT");
    await expectRefused(await cli(["stream", "get", "RUNWAY_AUDIT", "1"], A()), "Publish", "$JS.API.STREAM.INFO.RUNWAY_AUDIT");
    await expectRefused(await cli(["req", "$JS.API.DIRECT.GET.KV_rw_nodes", "{}"], A()), "Publish", "$JS.API.DIRECT.GET.KV_rw_nodes");
  });

  it("an operator's credentials run the ops commands of the README, and write nothing stored", async () => {
    const ls = await cli(["micro", "ls"], OPERATOR());
    expect(ls.code, said(ls)).toBe(0);
    expect(ls.stdout).toContain("runway");
    for (const verb of ["info", "stats"]) {
      const r = await cli(["micro", verb, "runway"], OPERATOR());
      expect(r.code, said(r)).toBe(0);
      expect(r.stdout).toContain("runs_start");
    }
    const metrics = await cli(["req", "runway.v1.ops.metrics", "", "--replies", "1", "--raw"], OPERATOR());
    expect(JSON.parse(metrics.stdout)).toMatchObject({ outcome: "ok" });
    const dead = await cli(["req", "runway.v1.ops.dead_letters", '{"limit": 10}', "--raw"], OPERATOR());
    expect(JSON.parse(dead.stdout)).toMatchObject({ outcome: "ok" });
    const tenants = await cli(["req", "runway.v1.ops.tenants.list", "{}", "--raw"], OPERATOR());
    expect(tenants.stdout).toContain('"ta"');
    const buckets = await cli(["kv", "ls"], OPERATOR());
    expect(buckets.code, said(buckets)).toBe(0);
    expect(buckets.stdout).toContain("rw_nodes");
    const liveness = await cli(["kv", "get", "rw_nodes", "node.node-a", "--raw"], OPERATOR());
    expect(liveness.code, said(liveness)).toBe(0);
    expect(liveness.stdout).toContain("node-a");
    const keys = await cli(["kv", "ls", "rw_nodes"], OPERATOR());
    expect(keys.stdout).toContain("node.node-a");
    const history = await cli(["kv", "history", "rw_nodes", "node.node-a"], OPERATOR());
    expect(history.code, said(history)).toBe(0);
    // The views' ephemeral consumers are created and deleted without a refusal.
    for (const r of [keys, history]) expect(said(r)).not.toContain("Permissions Violation");
    for (const args of [
      ["stream", "ls"],
      ["stream", "info", "RUNWAY_CMD"],
      ["stream", "subjects", "KV_rw_nodes"],
      ["consumer", "ls", "RUNWAY_CMD"],
    ]) {
      const r = await cli(args, OPERATOR());
      expect(r.code, `${args.join(" ")}: ${said(r)}`).toBe(0);
      expect(said(r)).not.toContain("Permissions Violation");
    }
    const report = await cli(["consumer", "report", "RUNWAY_CMD"], OPERATOR());
    expect(report.code, said(report)).toBe(0);
    expect(report.stdout).toContain("rw-mailbox-p0");
    const audit = await cli(["stream", "get", "RUNWAY_AUDIT", "1"], OPERATOR());
    expect(audit.code, said(audit)).toBe(0);
    const jsz = await cli(["server", "report", "jetstream"], as("system", "ops1"));
    expect(jsz.code, said(jsz)).toBe(0);
    // Read-only: no key written, no command injected, no partition mailbox touched.
    expect(said(await cli(["kv", "put", "rw_nodes", "node.x", "{}"], OPERATOR()))).toContain('Permissions Violation for Publish to "$KV.rw_nodes.node.x"');
    expect(said(await cli(["pub", "rw.cmd.0.run.x", "{}"], OPERATOR()))).toContain('Permissions Violation for Publish to "rw.cmd.0.run.x"');
    expect(said(await cli(["consumer", "rm", "-f", "RUNWAY_CMD", "rw-mailbox-p0"], OPERATOR()))).toContain(
      'Permissions Violation for Publish to "$JS.API.CONSUMER.DELETE.RUNWAY_CMD.rw-mailbox-p0"',
    );
  });

  it("a node answering tenant A reads who called from the server (Nats-Request-Info), which A cannot forge", async () => {
    const nodeSide = await connectAs(cred("node", "node-a"));
    const seen = nodeSide.subscribe("runway.v1.ta.tenant.get", { max: 1 });
    await nodeSide.flush();
    const h = headers();
    h.set("Nats-Request-Info", JSON.stringify({ acc: "TENANT_tb", user: "forged" }));
    await ncA.request("runway.v1.ta.tenant.get", "{}", { headers: h, timeout: 5_000 });
    for await (const m of seen) {
      const info = JSON.parse(m.headers?.get("Nats-Request-Info") ?? "{}") as { acc?: string; user?: string };
      expect(info).toMatchObject({ acc: "TENANT_ta", user: cred("tenant", "ta").publicKey });
    }
  });

  it("after a reload of the regenerated config, a revoked tenant's key is refused and an added tenant's works", async () => {
    const before = readFileSync(join(dir, "auth.conf"), "utf8");
    const ncB = await connectAs(cred("tenant", "tb"));
    // Kept aside: revoking deletes the seed file, and the point is that the key itself is refused.
    const kept = join(mkdtempSync(join(tmpdir(), "runway-creds-kept-")), "tb.nk");
    writeFileSync(kept, readFileSync(cred("tenant", "tb").path));
    expect((await new RunwayClient(ncB, "tb").call("runway.v1.tb.tenant.get", {})).outcome).toBe("found");
    const written = writeCredentials(dir, { tenants: ["ta", "tc"], users: USERS, operators: ["ops1"], nodes: ["node-a"] });
    if (written.outcome !== "ok") throw new Error("invalid");
    expect(written.revoked).toEqual(["tenants/tb.nk"]);
    expect(written.created).toEqual(["tenants/tc.nk"]);
    creds = written.credentials;
    writeFileSync(server.configPath, readFileSync(server.configPath, "utf8").replace(before, readFileSync(written.authConfig, "utf8")));
    await reload();
    await waitFor(() => ncB.isClosed(), { timeoutMs: 10_000, describe: "the server to drop tenant B's connection" });
    const again = await cli(["req", "runway.v1.tb.tenant.get", "{}"], { auth: ["--nkey", kept] });
    expect(again.code).not.toBe(0);
    expect(said(again)).toMatch(/Authorization Violation/i);
    await expect(connect({ servers: [server.url], authenticator: nkeyAuthenticator(new TextEncoder().encode(readSeed(kept))) })).rejects.toThrow(
      /Authorization Violation/i,
    );
    rmSync(dirname(kept), { recursive: true, force: true });
    expect((await clientA.call("runway.v1.ta.tenant.get", {})).outcome).toBe("found");
    const created = await cli(["req", "runway.v1.ops.tenants.put", '{"id":"tc"}', "--raw"], OPERATOR());
    expect(JSON.parse(created.stdout)).toMatchObject({ outcome: "created" });
    // nats-server 2.14 wires the imports of an account a reload introduced only on the next reload.
    await reload();
    const clientC = new RunwayClient(await connectAs(cred("tenant", "tc")), "tc");
    expect((await clientC.call("runway.v1.tc.tenant.get", {})).outcome).toBe("found");
  });
});
