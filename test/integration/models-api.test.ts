// A tenant's model providers over the API and the CLI (issue 38 §2): put/list/get/delete with
// closed answers, the key never in a reply, a log line or the CLI's output, a second node's
// watched copy following every change (and sending the stored key), bad input answered by type.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Kvm } from "@nats-io/kv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRunwayNode, type RunwayWorkflowNode } from "../../cluster/runway-node.js";
import { createModelProvider, MODELS_BUCKET, type ModelOutcome } from "../../gateways/models/index.js";
import { SERVICE_ERROR_HEADER, createLogger } from "../../runtime/index.js";
import { killAll, RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { startModelFake, type ModelFakeHandle } from "../fixtures/models/start.js";
import { HANDLERS, workflowWorld } from "./workflow-support.js";

/** Every line any node logs during this file, at every level. */
const logLines: string[] = [];
const sink = (line: string) => void logLines.push(line);
const world = workflowWorld({ name: "models-node", logger: createLogger("models-node", "debug", sink) });

const KEY = `sk-models-api-${Math.random().toString(36).slice(2)}-SECRET`;
const KEY_B64 = Buffer.from(KEY).toString("base64");
const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "runway-models-"));

let fake: ModelFakeHandle;
let second: RunwayWorkflowNode;
beforeAll(async () => {
  fake = await startModelFake("openai", [{ reply: { text: "hi", usage: { input_tokens: 3, output_tokens: 1 } } }]);
  second = await startRunwayNode({
    connection: world.server.connectOptions(),
    name: "models-node-2",
    handlers: [HANDLERS],
    api: false,
    logger: createLogger("models-node-2", "debug", sink),
  });
}, 60_000);
afterAll(async () => {
  await second?.stop();
  await fake?.stop();
  killAll();
  rmSync(dir, { recursive: true, force: true });
});

/** A request as raw bytes: the reply's text (to search for the key) and its JSON. */
async function ask(tenant: string, path: string, body: unknown): Promise<{ text: string; answer: Record<string, unknown> }> {
  const reply = await world.nc.request(`runway.v1.${tenant}.${path}`, JSON.stringify(body), { timeout: 20_000 });
  expect(reply.headers?.get(SERVICE_ERROR_HEADER) ?? null, reply.string()).toBeNull();
  const text = reply.string();
  return { text, answer: JSON.parse(text) as Record<string, unknown> };
}

function neverShowsKey(text: string): void {
  expect(text).not.toContain(KEY);
  expect(text).not.toContain(KEY_B64);
}

const hello = { model: "fake-model", messages: [{ role: "user" as const, content: "hello" }], max_tokens: 10 };

describe("runway.v1.<tenant>.models.*", () => {
  it("put creates then updates, get and list show views with api_key_set and never the key, delete deletes; each tenant its own", async () => {
    const provider = { name: "oa", kind: "openai", base_url: fake.baseUrl, api_key: KEY, models: ["fake-model"] };
    const created = await ask("t1", "models.put", { provider });
    expect(created.answer).toMatchObject({ outcome: "created", provider: { name: "oa", kind: "openai", api_key_set: true, timeout_ms: 120_000 } });
    neverShowsKey(created.text);
    const updated = await ask("t1", "models.put", { provider: { ...provider, timeout_ms: 5_000 } });
    expect(updated.answer).toMatchObject({ outcome: "updated", provider: { timeout_ms: 5_000, api_key_set: true } });
    neverShowsKey(updated.text);
    await ask("t1", "models.put", { provider: { name: "script", kind: "scripted", script: { turns: [{ text: "hello" }] } } });

    const got = await ask("t1", "models.get", { name: "oa" });
    expect(got.answer).toMatchObject({ outcome: "found", provider: { name: "oa", base_url: fake.baseUrl, api_key_set: true } });
    expect((got.answer.provider as Record<string, unknown>).api_key).toBeUndefined();
    neverShowsKey(got.text);
    const listed = await ask("t1", "models.list", {});
    expect(listed.answer.outcome).toBe("ok");
    expect((listed.answer.providers as { name: string; api_key_set: boolean }[]).map((p) => [p.name, p.api_key_set])).toEqual([
      ["oa", true],
      ["script", false],
    ]);
    neverShowsKey(listed.text);
    expect((await ask("t2", "models.list", {})).answer).toEqual({ outcome: "ok", providers: [] });
    expect((await ask("t2", "models.get", { name: "oa" })).answer).toEqual({ outcome: "model_provider_not_found" });

    // Stored with the record, but not as its text: a dump of the bucket does not show it.
    const stored = await (await new Kvm(world.nc).open(MODELS_BUCKET)).get("t1.oa");
    expect(stored?.string()).toContain('"name":"oa"');
    expect(stored?.string()).not.toContain(KEY);

    expect((await ask("t1", "models.delete", { name: "script" })).answer).toEqual({ outcome: "deleted" });
    expect((await ask("t1", "models.delete", { name: "script" })).answer).toEqual({ outcome: "model_provider_not_found" });
    expect((await ask("t1", "models.get", { name: "script" })).answer).toEqual({ outcome: "model_provider_not_found" });
    // Neither node logged the key, at any level.
    expect(logLines.length).toBeGreaterThan(0);
    neverShowsKey(logLines.join("\n"));
  });

  it("a second node's watched copy follows every change, and its record sends the stored key", async () => {
    const provider = { name: "watched", kind: "openai", base_url: fake.baseUrl, api_key: KEY, timeout_ms: 1_000 };
    expect((await ask("t1", "models.put", { provider })).answer.outcome).toBe("created");
    // The first read fills the second node's copy; from then on only its watch can change it.
    await waitFor(async () => (await second.models.provider("t1", "watched"))?.spec.name === "watched", {
      timeoutMs: 10_000,
      describe: "the provider on the second node",
    });
    expect((await ask("t1", "models.put", { provider: { ...provider, timeout_ms: 2_000 } })).answer.outcome).toBe("updated");
    await waitFor(async () => ((await second.models.get("t1", "watched")) as { timeout_ms?: number } | undefined)?.timeout_ms === 2_000, {
      timeoutMs: 10_000,
      describe: "the change on the second node",
    });

    const record = (await second.models.provider("t1", "watched"))!;
    await fake.reset();
    const outcome: ModelOutcome = await createModelProvider(record).complete(hello);
    expect(outcome.outcome).toBe("ok");
    expect((await fake.requests()).requests[0]?.authorization).toBe(`Bearer ${KEY}`);
    neverShowsKey(JSON.stringify(record));

    expect((await ask("t1", "models.delete", { name: "watched" })).answer).toEqual({ outcome: "deleted" });
    await waitFor(async () => (await second.models.provider("t1", "watched")) === undefined, { timeoutMs: 10_000, describe: "the delete on the second node" });
    neverShowsKey(logLines.join("\n"));
  });

  it("revision-checked writes: of eight concurrent puts of a new provider exactly one answers created, the others updated", async () => {
    const provider = (i: number) => ({ name: "raced", kind: "scripted", script: { turns: [{ text: `writer ${i}` }] } });
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => ask("t1", "models.put", { provider: provider(i) })));
    const outcomes = answers.map((a) => a.answer.outcome).sort();
    expect(outcomes).toEqual(["created", ...Array.from({ length: 7 }, () => "updated")]);
    expect((await ask("t1", "models.delete", { name: "raced" })).answer).toEqual({ outcome: "deleted" });
  });

  it("bad input: invalid_input naming the field (never the key), tenant_not_found, model_provider_not_found; never a fault", async () => {
    const bad = await ask("t1", "models.put", { provider: { name: "x", kind: "openai", base_url: "ftp://nope", api_key: KEY } });
    expect(bad.answer.outcome).toBe("invalid_input");
    expect(String(bad.answer.reason)).toContain("base_url");
    neverShowsKey(bad.text);
    const unknownField = await ask("t1", "models.put", { provider: { name: "x", kind: "openai", api_key: KEY, secret: KEY } });
    expect(unknownField.answer.outcome).toBe("invalid_input");
    neverShowsKey(unknownField.text);
    for (const body of [
      {},
      { provider: null },
      { provider: { name: "x", kind: "nope" } },
      { provider: { name: "a b", kind: "scripted", script: { turns: [] } } },
    ])
      expect((await ask("t1", "models.put", body)).answer.outcome, JSON.stringify(body)).toBe("invalid_input");
    for (const name of ["*", ">", "a.b", "", "x".repeat(65), "ü"]) {
      expect((await ask("t1", "models.get", { name })).answer.outcome).toBe("invalid_input");
      expect((await ask("t1", "models.delete", { name })).answer.outcome).toBe("invalid_input");
    }
    expect((await ask("t1", "models.list", { name: "x" })).answer.outcome).toBe("invalid_input");
    expect((await ask("nobody", "models.put", { provider: { name: "x", kind: "scripted", script: { turns: [] } } })).answer).toEqual({
      outcome: "tenant_not_found",
    });
    expect((await ask("nobody", "models.list", {})).answer).toEqual({ outcome: "tenant_not_found" });
    expect((await ask("t1", "models.get", { name: "absent" })).answer).toEqual({ outcome: "model_provider_not_found" });
    neverShowsKey(logLines.join("\n"));
  });
});

async function runway(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  const child = spawnTsx(cli, [...args, "--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--tenant", "t1"], {
    name: `runway ${args[0]}`,
    env,
  });
  const exit = await child.exited;
  return { code: exit.code, out: child.lines.join("\n") };
}

it("runway models: put from a file with --api-key-env, list, get, delete; the key in no output", async () => {
  const file = join(dir, "oa.json");
  writeFileSync(file, JSON.stringify({ name: "cli-oa", kind: "openai", base_url: fake.baseUrl }));
  const put = await runway(["models", "put", file, "--api-key-env", "CLI_MODEL_KEY"], { CLI_MODEL_KEY: KEY });
  expect(put.code, put.out).toBe(0);
  expect(put.out).toContain('"created"');
  expect(put.out).toContain('"api_key_set": true');
  neverShowsKey(put.out);
  const again = await runway(["models", "put", file, "--api-key-env", "CLI_MODEL_KEY"], { CLI_MODEL_KEY: KEY });
  expect(again.out).toContain('"updated"');
  const listed = await runway(["models", "list"]);
  expect(listed.code, listed.out).toBe(0);
  expect(listed.out).toContain('"name": "cli-oa"');
  neverShowsKey(listed.out);
  const got = await runway(["models", "get", "cli-oa"]);
  expect(got.code, got.out).toBe(0);
  neverShowsKey(got.out);
  const record = await world.node.models.provider("t1", "cli-oa");
  await fake.reset();
  expect((await createModelProvider(record!).complete(hello)).outcome).toBe("ok");
  expect((await fake.requests()).requests[0]?.authorization).toBe(`Bearer ${KEY}`);

  const unset = await runway(["models", "put", file, "--api-key-env", "CLI_MODEL_KEY_UNSET"]);
  expect(unset.code, unset.out).toBe(2);
  expect(unset.out).toContain("CLI_MODEL_KEY_UNSET");
  const both = join(dir, "both.json");
  writeFileSync(both, JSON.stringify({ name: "both", kind: "openai", api_key: KEY }));
  const twice = await runway(["models", "put", both, "--api-key-env", "CLI_MODEL_KEY"], { CLI_MODEL_KEY: KEY });
  expect(twice.code, twice.out).toBe(2);
  neverShowsKey(twice.out);
  const invalid = join(dir, "invalid.json");
  writeFileSync(invalid, JSON.stringify({ name: "bad", kind: "openai", base_url: "nope", api_key: KEY }));
  const refused = await runway(["models", "put", invalid]);
  expect(refused.code, refused.out).toBe(1);
  expect(refused.out).toContain("invalid_input");
  neverShowsKey(refused.out);

  expect((await runway(["models", "delete", "cli-oa"])).code).toBe(0);
  const gone = await runway(["models", "get", "cli-oa"]);
  expect(gone.code).toBe(1);
  expect(gone.out).toContain("model_provider_not_found");
  expect((await runway(["models", "frobnicate"])).code).toBe(2);
  neverShowsKey(logLines.join("\n"));
});
