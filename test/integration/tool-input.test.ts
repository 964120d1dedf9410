import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { repoRoot, RUNWAY_USER, waitFor } from "../harness/index.js";
import { startModernServer, type EffectsServerHandle } from "../fixtures/mcp/start.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

/**
 * A tool server asks a person for input during a call (MCP 2026-07-28 MRTR, the successor of
 * `elicitation/create`): the form goes to the run's inbox with the server's schema, the step
 * waits holding no worker, and the call is made again with the person's answer (accept, or
 * decline on reject).
 */
const world = workflowWorld({ name: "tool-input-node" });
let modern: EffectsServerHandle;

type View = RunAnswer & { waiting: { on: string; ref: string } | null };
type Item = {
  id: string;
  kind: string;
  prompt: string;
  group: string | null;
  payload: { server: string; tool: string; requests: { key: string; message: string; schema: Record<string, unknown> }[] };
};
const inbox = async (run: string) => ((await world.client.approvals({ run_id: run })).approvals as Item[]) ?? [];
const confirmed = () => modern.counts().effects.confirm_charge ?? 0;

beforeAll(async () => {
  modern = await startModernServer();
  const put = await world.client.putToolServer({ name: "bank", protocol: "2026-07-28", transport: { type: "http", url: modern.url } });
  expect(put.outcome).toBe("saved");
  const def = {
    name: "confirmed-charge",
    nodes: [{ id: "pay", kind: "tool", server: "bank", tool: "confirm_charge", arguments: { account: "${input.account}", amount: 5 } }],
  };
  const published = await world.client.putDefinition(def);
  expect(published.outcome).toMatch(/published|unchanged/);
  expect(
    (
      await world.client.putDefinition({
        name: "asks-in-handler",
        nodes: [
          {
            id: "h",
            kind: "code",
            handler: "calls_in_order",
            input: { server: "bank", calls: [{ tool: "confirm_charge", args: { account: "h", amount: 1 } }] },
          },
        ],
      })
    ).outcome,
  ).toMatch(/published|unchanged/);
}, 30_000);
afterAll(async () => {
  await modern?.stop();
});

async function waitingOnInput(account: string): Promise<{ id: string; item: Item }> {
  const started = await world.client.startRun({ definition: "confirmed-charge", input: { account } });
  expect(started.outcome).toBe("started");
  const id = (started.run as RunAnswer).id;
  const item = await waitFor(async () => (await inbox(id))[0], { timeoutMs: 15_000, describe: "the server's form in the inbox" });
  return { id, item };
}

it("the server's form waits in the inbox holding no worker; approved with content that fits its schema, the call is made again with the answer and completes once", async () => {
  const before = confirmed();
  const { id, item } = await waitingOnInput("alice");
  expect(item).toMatchObject({ kind: "input", prompt: "Charge alice 5?", payload: { server: "bank", tool: "confirm_charge" } });
  expect(item.payload.requests).toEqual([{ key: "confirm", message: "Charge alice 5?", schema: expect.objectContaining({ required: ["ok"] }) }]);
  const run = (await world.client.getRun(id)).run as View;
  expect(run.status).toBe("waiting");
  expect(run.waiting).toMatchObject({ on: "approval", ref: item.id });
  await waitFor(() => world.node.executor.inFlight === 0 || undefined, { timeoutMs: 10_000, describe: "no worker held while a person answers" });
  expect(confirmed()).toBe(before);
  // Content that does not fit the server's schema is refused before anything is stored.
  const bad = await world.client.decide(item.id, "approve", { payload: { ok: "yes" }, by: "bob" });
  expect(bad.outcome).toBe("invalid_input");
  expect((await world.client.decide(item.id, "edit", { payload: { ok: true }, by: "bob" })).outcome).toBe("invalid_input");
  expect((await inbox(id)).map((i) => i.id)).toEqual([item.id]);
  expect((await world.client.decide(item.id, "approve", { payload: { ok: true, note: "checked" }, by: "bob" })).outcome).toBe("decided");
  const ended = await world.settled(id);
  expect(ended.status).toBe("succeeded");
  expect(ended.result).toMatchObject({ pay: { account: "alice", amount: 5, note: "checked" } });
  expect(confirmed()).toBe(before + 1);
  expect(await inbox(id)).toEqual([]);
});

it("rejected, the form is declined: the server is told so and the node fails with the tool's own error; nothing is charged", async () => {
  const before = confirmed();
  const { id, item } = await waitingOnInput("carol");
  expect((await world.client.decide(item.id, "reject", { reason: "not today", by: "bob" })).outcome).toBe("decided");
  const ended = await world.settled(id);
  expect(ended.status).toBe("failed");
  expect(JSON.stringify(ended.nodes.pay!.error)).toContain("not confirmed (decline)");
  expect(confirmed()).toBe(before);
});

it("a handler's call cannot wait on a person: it fails tool_requires_input", async () => {
  const started = await world.client.startRun({ definition: "asks-in-handler" });
  const ended = await world.settled((started.run as RunAnswer).id);
  expect(ended.status).toBe("failed");
  expect(JSON.stringify(ended.nodes.h!.error)).toContain("tool_requires_input");
});

it("runway approvals answers a request for input as the API does: approve --payload (or --payload-file) sends the form's content; content that does not fit and an edit are refused with the API's reason, exit 1", async () => {
  const bin = fileURLToPath(new URL("../../bin/runway.mjs", import.meta.url));
  const runway = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        [bin, ...args, "--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--tenant", "t1"],
        { cwd: repoRoot, env: { ...process.env, npm_lifecycle_event: undefined, RUNWAY_SERVERS: undefined, RUNWAY_TENANT: undefined } },
        (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
      ),
    );
  const dir = mkdtempSync(join(tmpdir(), "runway-cli-input-"));
  try {
    const before = confirmed();
    const { id, item } = await waitingOnInput("dora");
    const shown = await runway(["approvals", "show", item.id]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain('"kind": "input"');
    const misfit = await runway(["approvals", "approve", item.id, "--payload", '{"ok":"yes"}', "--by", "bob"]);
    expect(misfit.code, misfit.stderr).toBe(1);
    expect(misfit.stderr).toMatch(/^runway: approvals approve: invalid_input: confirm: /);
    const edited = await runway(["approvals", "edit", item.id, "--payload", '{"ok":true}', "--by", "bob"]);
    expect(edited.code, edited.stderr).toBe(1);
    expect(edited.stderr).toMatch(/^runway: approvals edit: invalid_input: a request for input is answered with approve/);
    expect((await inbox(id)).map((i) => i.id)).toEqual([item.id]);
    const form = join(dir, "form.json");
    writeFileSync(form, JSON.stringify({ ok: true, note: "from the cli" }));
    const approved = await runway(["approvals", "approve", item.id, "--payload-file", form, "--by", "bob"]);
    expect(approved.code, approved.stderr).toBe(0);
    expect(JSON.parse(approved.stdout)).toMatchObject({ outcome: "decided", approval: item.id, decision: "approved" });
    const ended = await world.settled(id);
    expect(ended.status).toBe("succeeded");
    expect(ended.result).toMatchObject({ pay: { account: "dora", amount: 5, note: "from the cli" } });
    expect(confirmed()).toBe(before + 1);
    // Rejected from the command line, the next form is declined.
    const next = await waitingOnInput("erin");
    const rejected = await runway(["approvals", "reject", next.item.id, "--reason", "not today", "--by", "bob"]);
    expect(rejected.code, rejected.stderr).toBe(0);
    expect((await world.settled(next.id)).status).toBe("failed");
    expect(confirmed()).toBe(before + 1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
