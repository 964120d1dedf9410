import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH } from "../../machines/index.js";
import { SERVICE_ERROR_CODE_HEADER, SERVICE_ERROR_HEADER } from "../../runtime/index.js";
import { waitFor } from "../harness/index.js";
import { workflowWorld } from "./workflow-support.js";

/**
 * Issue 8, "bad input never crashes a node and never corrupts state": tenant ids, definition
 * names, run ids and bodies nested past the limit, alone and in a generated mix, sent to every
 * endpoint of the `runway` micro service. Every answer is closed (`{ outcome }`), none is a
 * service error, and the node serves normal starts afterwards.
 */
const world = workflowWorld();

const FLOW = { name: "ok-flow", nodes: [{ id: "a", kind: "code", handler: "noop" }] };
/** No id, name or key may be any of these; each once reached a KV key or a subject token, or answered 500. */
const BAD = ["*", ">", "a b", "$KV", "ü", "租户", "\u0000", "", "x".repeat(300), "a.b", "t1.*", "..", "\ud800", "__proto__", "-", "A"];
/** `ops` is a fine definition name or project, but no tenant. */
const BAD_TENANTS = [...BAD, "ops"];
/** Bad tenants that still make a legal subject token (the client itself refuses the others). */
const BAD_SUBJECT_TOKENS = BAD_TENANTS.filter((t) => t !== "" && !/[\s.]/.test(t) && t !== "\ud800");
/** A value nesting `levels` objects. */
function nestedObjects(levels: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < levels; i++) v = { a: v };
  return v;
}
/** JSON text of `{"x": …}` nesting `levels` arrays inside (built as text: it is too deep for JSON.stringify). */
const deepBody = (levels: number, key = "x") => `{"${key}":${"[".repeat(levels)}${"]".repeat(levels)}}`;

type Reply = { fault: string | null; answer: Record<string, unknown> | undefined; text: string };

async function send(subject: string, body: string): Promise<Reply> {
  const reply = await world.nc.request(subject, body, { timeout: 20_000 });
  const fault = reply.headers?.get(SERVICE_ERROR_HEADER) ? `${reply.headers.get(SERVICE_ERROR_CODE_HEADER)} ${reply.headers.get(SERVICE_ERROR_HEADER)}` : null;
  let answer: Record<string, unknown> | undefined;
  try {
    answer = JSON.parse(reply.string()) as Record<string, unknown>;
  } catch {
    answer = undefined;
  }
  return { fault, answer, text: reply.string() };
}

/** Sends and requires a closed answer: JSON with an `outcome`, no service-error header. */
async function closed(subject: string, body: unknown): Promise<Record<string, unknown>> {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const r = await send(subject, text);
  const what = `${subject} ${text.slice(0, 120)}`;
  expect(r.fault, `service error for ${what}`).toBeNull();
  expect(typeof r.answer?.outcome, `no outcome for ${what}: ${r.text.slice(0, 200)}`).toBe("string");
  return r.answer!;
}

/** Every endpoint with a body that puts `v` where the endpoint reads an id, a name or a key. */
function probes(v: string): { subject: string; body: unknown; expect: string[] }[] {
  const t = "runway.v1.t1";
  return [
    { subject: `${t}.definitions.put`, body: { definition: { ...FLOW, name: v } }, expect: ["invalid_definition"] },
    {
      subject: `${t}.definitions.put`,
      body: { definition: { name: "sub-bad", nodes: [{ id: "s", kind: "subworkflow", workflow: v }] } },
      expect: ["invalid_definition"],
    },
    { subject: `${t}.definitions.get`, body: { name: v }, expect: ["invalid_input", "definition_not_found"] },
    { subject: `${t}.definitions.list`, body: { name: v }, expect: ["invalid_input"] },
    { subject: `${t}.definitions.disable`, body: { name: v }, expect: ["invalid_input", "definition_not_found"] },
    { subject: `${t}.definitions.enable`, body: { name: v }, expect: ["invalid_input", "definition_not_found"] },
    { subject: `${t}.runs.start`, body: { definition: v }, expect: ["invalid_input", "definition_not_found"] },
    { subject: `${t}.runs.start`, body: { definition: "ok-flow", project: v }, expect: ["invalid_input", "started"] },
    { subject: `${t}.runs.get`, body: { run_id: v }, expect: ["invalid_input", "run_not_found"] },
    { subject: `${t}.runs.get`, body: { run_id: `t1_${v}` }, expect: ["invalid_input", "run_not_found"] },
    { subject: `${t}.runs.cancel`, body: { run_id: v }, expect: ["invalid_input", "run_not_found"] },
    { subject: `${t}.runs.cancel`, body: { run_id: `t1_${v}` }, expect: ["invalid_input", "run_not_found"] },
    { subject: `${t}.runs.list`, body: { status: v }, expect: ["invalid_input"] },
    { subject: `${t}.tenant.get`, body: { id: v }, expect: ["invalid_input"] },
    // A project is a token of its own rule (TokenSchema): `a.b` is one, and is no key or subject.
    { subject: `${t}.tenant.put`, body: { settings: { project_max_concurrency: { [v]: 1 } } }, expect: ["invalid_input", "updated", "unchanged"] },
    { subject: "runway.v1.ops.tenants.list", body: { id: v }, expect: ["invalid_input"] },
    { subject: "runway.v1.ops.sweep", body: { id: v }, expect: ["invalid_input"] },
    { subject: "runway.v1.ops.dead_letters", body: { limit: v }, expect: ["invalid_input"] },
    { subject: "runway.v1.ops.dead_letters", body: { id: v }, expect: ["invalid_input"] },
    { subject: "runway.v1.ops.metrics", body: { id: v }, expect: ["ok"] },
    // `A`, `-` and `__proto__` are fine provider names: the put before makes them, get finds and delete deletes them.
    { subject: `${t}.models.put`, body: { provider: { name: v, kind: "scripted", script: { turns: [] } } }, expect: ["invalid_input", "created", "updated"] },
    { subject: `${t}.models.put`, body: { provider: { name: "p", kind: v } }, expect: ["invalid_input"] },
    { subject: `${t}.models.put`, body: { provider: { name: "p", kind: "openai", base_url: v, api_key: v } }, expect: ["invalid_input"] },
    { subject: `${t}.models.get`, body: { name: v }, expect: ["invalid_input", "model_provider_not_found", "found"] },
    { subject: `${t}.models.delete`, body: { name: v }, expect: ["invalid_input", "model_provider_not_found", "deleted"] },
    { subject: `${t}.models.list`, body: { name: v }, expect: ["invalid_input"] },
  ];
}

/** The ops endpoints whose body names a tenant. */
const TENANT_ID_PROBES = (v: string) => ["put", "kill", "drain", "resume"].map((to) => ({ subject: `runway.v1.ops.tenants.${to}`, body: { id: v } }));

const TENANT_PATHS = [
  "definitions.put",
  "definitions.get",
  "definitions.list",
  "runs.start",
  "runs.get",
  "runs.list",
  "runs.cancel",
  "tenant.get",
  "tenant.put",
  "models.put",
  "models.get",
  "models.list",
  "models.delete",
];
const OPS_SUBJECTS = [
  "runway.v1.ops.tenants.put",
  "runway.v1.ops.tenants.list",
  "runway.v1.ops.tenants.kill",
  "runway.v1.ops.tenants.drain",
  "runway.v1.ops.tenants.resume",
  "runway.v1.ops.sweep",
  "runway.v1.ops.dead_letters",
];

async function normalStartSucceeds(tenant: string): Promise<void> {
  const client = world.clientFor(tenant);
  const started = await client.startRun({ definition: "ok-flow" });
  expect(started.outcome).toBe("started");
  expect((started.run as { status: string }).status).toBe("running");
  expect((await world.settled((started.run as { id: string }).id, client)).status).toBe("succeeded");
}

describe("bad input to every endpoint gets a closed answer", () => {
  it("bad tenant ids, definition names and run ids: invalid_input (tenant_not_found for the subject token), never a 500", async () => {
    await world.client.putDefinition(FLOW);
    for (const v of BAD) {
      for (const p of probes(v)) {
        const answer = await closed(p.subject, p.body);
        expect(p.expect, `${p.subject} ${JSON.stringify(p.body)} answered ${JSON.stringify(answer)}`).toContain(answer.outcome);
      }
    }
    for (const v of BAD_TENANTS)
      for (const p of TENANT_ID_PROBES(v))
        expect(await closed(p.subject, p.body), `${p.subject} ${JSON.stringify(p.body)}`).toMatchObject({ outcome: "invalid_input" });
    for (const token of BAD_SUBJECT_TOKENS) {
      for (const path of TENANT_PATHS)
        expect((await closed(`runway.v1.${token}.${path}`, path === "definitions.get" ? { name: "ok-flow" } : {})).outcome).toMatch(
          /^(tenant_not_found|invalid_input)$/,
        );
    }
    // The names `*` and `>` once exposed the KV layout: `invalid key: t1.*.latest`.
    expect(await closed("runway.v1.t1.definitions.get", { name: "*" })).toMatchObject({
      outcome: "invalid_input",
      reason: expect.stringContaining("workflow name"),
    });
    expect(await closed("runway.v1.ops.tenants.kill", { id: "*" })).toMatchObject({ outcome: "invalid_input", reason: expect.stringContaining("tenant id") });
    // A version whose text is not plain digits would be a malformed key too.
    expect((await closed("runway.v1.t1.definitions.get", { name: "ok-flow", version: 1e21 })).outcome).toBe("invalid_input");
    await normalStartSucceeds("t1");
  });

  it(`bodies nested past ${MAX_JSON_DEPTH} levels: invalid_input everywhere, invalid_definition (too_deep) from definitions.put`, async () => {
    for (const levels of [MAX_JSON_DEPTH, 2_000, 200_000]) {
      for (const path of TENANT_PATHS) {
        const key = path === "definitions.put" ? "definition" : path === "runs.start" ? "input" : "x";
        const answer = await closed(`runway.v1.t1.${path}`, deepBody(levels, key));
        if (path === "definitions.put") expect(answer).toMatchObject({ outcome: "invalid_definition", errors: [{ code: "too_deep" }] });
        else expect(answer).toMatchObject({ outcome: "invalid_input", reason: expect.stringContaining(`deeper than ${MAX_JSON_DEPTH} levels`) });
      }
      for (const subject of OPS_SUBJECTS) expect(await closed(subject, deepBody(levels))).toMatchObject({ outcome: "invalid_input" });
      expect((await closed("runway.v1.ops.metrics", deepBody(levels))).outcome).toBe("ok");
    }
    // The body is level 1: an input may nest 63 levels, a node's input template 60 (below body, definition, nodes, node).
    expect((await closed("runway.v1.t1.runs.start", { definition: "ok-flow", input: nestedObjects(MAX_JSON_DEPTH - 1) })).outcome).toBe("started");
    expect((await closed("runway.v1.t1.runs.start", { definition: "ok-flow", input: nestedObjects(MAX_JSON_DEPTH) })).outcome).toBe("invalid_input");
    const flow = (levels: number) => ({ definition: { name: "deep-flow", nodes: [{ id: "a", kind: "code", handler: "noop", input: nestedObjects(levels) }] } });
    expect((await closed("runway.v1.t1.definitions.put", flow(MAX_JSON_DEPTH - 4))).outcome).toBe("published");
    expect(await closed("runway.v1.t1.definitions.put", flow(MAX_JSON_DEPTH - 3))).toMatchObject({
      outcome: "invalid_definition",
      errors: [{ code: "too_deep" }],
    });
    await normalStartSucceeds("t1");
  });

  it("a generated mix of bad values, bodies and subjects: every answer closed, none a 500", async () => {
    await world.client.createTenant("fuzz");
    await world.clientFor("fuzz").putDefinition(FLOW);
    await world.client.putDefinition(FLOW);
    const bad = fc.oneof(
      fc.constantFrom(...BAD_TENANTS),
      fc.string({ unit: "binary", maxLength: 40 }),
      fc.string({ unit: fc.constantFrom("a", "1", "-", "_", ".", "*", ">", "$", " ", "\u0000"), maxLength: 40 }),
    );
    const deepArrays = fc.integer({ min: 1, max: 80 }).map((levels) => JSON.parse(`${"[".repeat(levels)}${"]".repeat(levels)}`) as unknown);
    const value = fc.oneof(bad, fc.jsonValue({ maxDepth: 4 }), deepArrays);
    const runId = fc.oneof(
      bad,
      bad.map((b) => `fuzz_${b}`),
    );
    const node = fc.record(
      {
        id: bad,
        kind: fc.constantFrom("code", "subworkflow", "parallel", "branch", "teleport"),
        handler: fc.constantFrom("noop", "nope"),
        workflow: bad,
        input: value,
      },
      { requiredKeys: ["id", "kind"] },
    );
    const opt = { requiredKeys: [] as never[] };
    // Each endpoint's own fields, filled with bad or random values, so that most requests get past the schema to the part under test.
    const bodies: Record<string, fc.Arbitrary<unknown>> = {
      "definitions.put": fc.record(
        {
          definition: fc.oneof(fc.record({ name: fc.oneof(bad, fc.constant("fuzzed")), nodes: fc.array(node, { maxLength: 3 }) }), value),
          publish: fc.boolean(),
        },
        { requiredKeys: ["definition"] },
      ),
      "definitions.get": fc.record({ name: bad, version: fc.oneof(fc.integer(), fc.double(), fc.constant(1e21)) }, { requiredKeys: ["name"] }),
      "definitions.list": fc.constant({}),
      "runs.start": fc.record(
        {
          definition: fc.oneof(bad, fc.constant("ok-flow")),
          input: value,
          project: bad,
          lane: bad,
          priority: fc.integer(),
          start_key: fc.record({ source: bad, delivery_id: bad }),
        },
        { requiredKeys: ["definition"] },
      ),
      "runs.get": fc.record({ run_id: runId }),
      "runs.list": fc.record({ status: bad, limit: fc.integer() }, opt),
      "runs.cancel": fc.record({ run_id: runId, reason: bad, by: bad }, { requiredKeys: ["run_id"] }),
      "tenant.get": fc.constant({}),
      "tenant.put": fc.record({
        settings: fc.oneof(
          value,
          fc.record({ project_max_concurrency: fc.dictionary(bad, fc.integer({ min: -1, max: 5 })), provider_quotas: fc.dictionary(bad, value) }, opt),
        ),
      }),
      "models.put": fc.record({
        provider: fc.oneof(
          value,
          fc.record({ name: bad, kind: fc.constantFrom("openai", "anthropic", "scripted", "x"), base_url: bad, api_key: value, script: value }, opt),
        ),
      }),
      "models.get": fc.record({ name: bad }),
      "models.delete": fc.record({ name: bad }),
      "ops.tenants.put": fc.record({ id: bad, settings: value }, { requiredKeys: ["id"] }),
      "ops.tenants.kill": fc.record({ id: bad, reason: bad }, { requiredKeys: ["id"] }),
      "ops.tenants.drain": fc.record({ id: bad, reason: bad }, { requiredKeys: ["id"] }),
      "ops.tenants.resume": fc.record({ id: bad, reason: bad }, { requiredKeys: ["id"] }),
      "ops.tenants.list": fc.record({ id: bad }),
      "ops.sweep": fc.record({ id: bad }),
      "ops.metrics": value,
    };
    const request = fc.constantFrom(...Object.keys(bodies)).chain((path) => {
      const subject = path.startsWith("ops.")
        ? fc.constant(`runway.v1.${path}`)
        : fc
            .oneof({ weight: 4, arbitrary: fc.constant("fuzz") }, { weight: 1, arbitrary: fc.constantFrom(...BAD_SUBJECT_TOKENS) })
            .map((t) => `runway.v1.${t}.${path}`);
      const body = fc.oneof(
        { weight: 8, arbitrary: bodies[path]!.map((b) => JSON.stringify(b)) },
        {
          weight: 1,
          arbitrary: fc.integer({ min: MAX_JSON_DEPTH, max: 5_000 }).map((levels) => deepBody(levels, path === "definitions.put" ? "definition" : "input")),
        },
        { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 60 }) },
      );
      return fc.tuple(subject, body);
    });
    const requests = fc.sample(request, { numRuns: 500, seed: 8 });
    const outcomes = new Map<string, number>();
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < requests.length) {
          const [s, b] = requests[next++]!;
          const r = await send(s, b);
          expect(r.fault, `service error for ${s} ${b.slice(0, 120)}`).toBeNull();
          expect(typeof r.answer?.outcome, `no outcome for ${s} ${b.slice(0, 120)}: ${r.text.slice(0, 200)}`).toBe("string");
          const outcome = String(r.answer!.outcome);
          outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        }
      }),
    );
    console.log("generated mix outcomes", JSON.stringify(Object.fromEntries(outcomes)));
    for (const o of ["invalid_input", "invalid_definition", "tenant_not_found", "run_not_found"]) expect(outcomes.get(o), o).toBeGreaterThan(0);
    await normalStartSucceeds("t1");
    await normalStartSucceeds("fuzz");
  });
});

describe("a start refused after its tenant admitted it gives the slot back", () => {
  const activeRuns = async (tenant: string) => {
    const answer = await world.clientFor(tenant).getTenant();
    const view = answer.tenant as { active_runs: number; queued_runs: number };
    return { active: view.active_runs, queued: view.queued_runs };
  };

  it("100 deeply nested starts through the API leave active_runs at 0, and the next run starts at once", async () => {
    await world.client.createTenant("deep");
    const client = world.clientFor("deep");
    await client.putDefinition(FLOW);
    const input = nestedObjects(1_400); // 8 KB, well under the 32 KiB input limit
    const answers = await Promise.all(Array.from({ length: 100 }, () => closed("runway.v1.deep.runs.start", { definition: "ok-flow", input })));
    for (const a of answers) expect(a).toMatchObject({ outcome: "invalid_input" });
    expect(await activeRuns("deep")).toEqual({ active: 0, queued: 0 });
    await normalStartSucceeds("deep");
  });

  it("a create the run actor cannot store (past the API's depth check) releases its tenant slot at once", async () => {
    // One slot: a start that kept it would queue the next one behind it.
    await world.client.createTenant("cap1", { max_concurrency: 1 });
    const client = world.clientFor("cap1");
    await client.putDefinition(FLOW);
    for (let i = 0; i < 20; i++) {
      // Straight to the run service, as a caller inside the node would: the tenant admits, the run actor refuses.
      const answer = await world.node.runs.start("cap1", { definition: "ok-flow", input: nestedObjects(2_000) });
      expect(answer).toEqual({ outcome: "invalid_input", reason: "state_unencodable" });
      expect(await activeRuns("cap1")).toEqual({ active: 0, queued: 0 });
    }
    await normalStartSucceeds("cap1");
    await waitFor(async () => (await activeRuns("cap1")).active === 0, { timeoutMs: 10_000, describe: "cap1's slot back after its run ended" });
  });
});
