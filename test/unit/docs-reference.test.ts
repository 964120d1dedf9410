// The reference pages list every progress event type and every code the system answers with, and
// nothing it does not (issue 37 §6: `run_cancel_requested` and the `stopped` code had gone
// undocumented). The emitted sets are read from the sources that emit them, the documented sets
// from the tables of docs/*.md; both directions are checked.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

type Source = { path: string; text: string };

function sourcesUnder(...dirs: string[]): Source[] {
  const out: Source[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith(".ts") && !name.endsWith(".d.ts")) out.push({ path: relative(ROOT, path), text: readFileSync(path, "utf8") });
    }
  };
  for (const d of dirs) walk(join(ROOT, d));
  return out;
}

/** The domain's sources: where runs, tenants, tools and the API answer and publish. */
const DOMAIN = sourcesUnder("machines", "actors", "gateways", "cluster");
/** Every source, for "does this documented name exist at all". */
const ALL = [...DOMAIN, ...sourcesUnder("runtime")];

const EVENT_TYPE = /^[a-z]+(?:_[a-z]+)+$/;
const literals = (text: string): string[] => [...text.matchAll(/"([a-z][a-z_]*)"/g)].map((m) => m[1]!);

/** The argument of a call starting at `from` (just after `(` or a `,`), up to its top-level `,` or `)`. */
function argumentAt(text: string, from: number): string {
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    const c = text[i]!;
    if (c === "(" || c === "[" || c === "{") depth++;
    else if (c === ")" || c === "]" || c === "}") {
      if (depth === 0) return text.slice(from, i);
      depth--;
    } else if (c === "," && depth === 0) return text.slice(from, i);
  }
  return text.slice(from);
}

/**
 * Event types the code publishes: the type argument of every `publish(d, type, …)` in the run's
 * decisions (a literal, a choice of literals, or a parameter a helper forwards: then the literals
 * its callers pass), and the live subjects a node publishes itself (`rw.evt.….<type>`).
 */
function emittedEventTypes(): { types: Set<string>; unresolved: string[] } {
  const types = new Set<string>();
  const unresolved: string[] = [];
  for (const { path, text } of DOMAIN) {
    for (const m of text.matchAll(/(?<![.\w])publish\(\s*d\s*,\s*/g)) {
      const arg = argumentAt(text, m.index + m[0].length).trim();
      const found = literals(arg).filter((s) => EVENT_TYPE.test(s));
      if (found.length > 0) {
        for (const t of found) types.add(t);
        continue;
      }
      // A parameter: find the helper that takes it and the literals its callers pass in that place.
      const helper = new RegExp(`function (\\w+)\\(([^)]*)\\b${arg}\\s*:\\s*string`).exec(text);
      const position = helper ? helper[2]!.split(",").length - 1 : -1;
      const passed: string[] = [];
      if (helper)
        for (const s of DOMAIN)
          for (const call of s.text.matchAll(new RegExp(`(?<![\\w.])${helper[1]}\\(`, "g"))) {
            if (s.text.slice(call.index - 9, call.index) === "function ") continue;
            let at = call.index + call[0].length;
            let value = "";
            for (let i = 0; i <= position; i++) {
              value = argumentAt(s.text, at);
              at += value.length + 1;
            }
            passed.push(...literals(value).filter((v) => EVENT_TYPE.test(v)));
          }
      if (passed.length === 0) unresolved.push(`${path}: publish(d, ${arg}, …)`);
      for (const t of passed) types.add(t);
    }
    for (const m of text.matchAll(/`rw\.evt\.[^`]*\.([a-z]+(?:_[a-z]+)+)`/g)) types.add(m[1]!);
  }
  return { types, unresolved };
}

/** Union types named `…Code` or `…Reason` (`type FailureCode = "a" | "b"`): closed code lists written as types. */
function codeUnions(sources: Source[]): string[] {
  const out: string[] = [];
  for (const { text } of sources)
    for (const m of text.matchAll(/type \w*(?:Code|Reason)\s*=([^;]*);/g)) {
      const body = m[1]!.replace(/\/\*[\s\S]*?\*\//g, "");
      if (/^\s*\|?\s*"/.test(body)) out.push(...literals(body));
    }
  return out;
}

/**
 * Closed code lists written as constants, wherever they live (`PLATFORM_STOP_CODES = [...] as
 * const`, `DeadLetterReason = { BadSubject: "bad_subject", ... } as const`): the list's name says
 * what it holds, so a list moved to another folder is still found.
 */
function codeLists(sources: Source[]): Map<string, string[]> {
  const lists = new Map<string, string[]>();
  for (const { text } of sources) {
    const code = text.replace(/\/\*[\s\S]*?\*\//g, "");
    for (const m of code.matchAll(/const (\w*(?:CODES|REASONS|Reason))\s*=\s*[[{]([^\]}]*)[\]}]\s*as const/g)) lists.set(m[1]!, literals(m[2]!));
  }
  return lists;
}

/**
 * Codes and outcomes the code answers with: every `code:` and `outcome:` literal (or union of
 * literals, or zod literal or enum) in the domain, a `ToolError` a handler sees, a gateway's refusal, the closed code
 * lists, and the pool's failure codes.
 */
function emittedCodes(): Set<string> {
  const codes = new Set<string>();
  for (const { text } of DOMAIN) {
    for (const m of text.matchAll(/\b(?:code|outcome)\s*:\s*("[a-z_]+"(?:\s*\|\s*"[a-z_]+")*)/g)) for (const c of literals(m[1]!)) codes.add(c);
    // The same, written as zod schemas (an answer union's single source): `outcome: z.literal("x")`, `code: z.enum([...])`.
    for (const m of text.matchAll(/\b(?:code|outcome)\s*:\s*z\s*\.\s*(?:literal\(\s*("[a-z_]+")|enum\(\s*\[([^\]]*)\])/g))
      for (const c of literals(m[1] ?? m[2] ?? "")) codes.add(c);
    for (const m of text.matchAll(/(?:new ToolError|refused)\(\s*"([a-z_]+)"/g)) codes.add(m[1]!);
  }
  for (const { text } of sourcesUnder("runtime/pool")) for (const m of text.matchAll(/new ToolError\(\s*"([a-z_]+)"/g)) codes.add(m[1]!);
  for (const c of codeUnions([...DOMAIN, ...sourcesUnder("runtime/pool")])) codes.add(c);
  const lists = codeLists(ALL);
  for (const name of ["PLATFORM_STOP_CODES", "CEILING_REASONS", "ADMISSION_CODES", "DeadLetterReason"])
    if (!lists.get(name)?.length) throw new Error(`the closed code list ${name} was not found in the sources`);
  for (const list of lists.values()) for (const c of list) codes.add(c);
  return codes;
}

/**
 * Answers that never leave a node: between the run actor and the services, the tenant actor and
 * the runs it admits, the gateway and the tool step, a store read and its caller, or XState's
 * own issue codes. Each is turned into a documented answer (or a 503 fault) before it crosses the
 * API, an event or a handler. An entry here that no source names any more fails the test too.
 */
const INTERNAL = new Set<string>([
  // run and step machines: a command's answer to the host, never sent on
  "moved",
  "refused",
  "illegal_transition",
  "not_before",
  "approved",
  // an agent's gated proposal a person rejected: the loop tells the model, never sent on
  "rejected",
  "observed",
  "in_flight",
  "let_finish",
  "needs_approval",
  "lookup",
  "reconcile",
  "recorded",
  "parked",
  "waiting",
  // the tenant actor's answers to the runs it admits and ends (a start answers `started`)
  "admitted",
  "queued",
  "ended",
  "promoted",
  "migrated",
  "migrating",
  "not_running",
  "not_held",
  "expansion_admitted",
  "expansion_refused",
  "expansion_released",
  "unknown",
  // why a run waits in its tenant's queue, and why a scheduler pass leased nothing
  "concurrency_cap_reached",
  "project_cap_reached",
  "no_free_slot",
  "nothing_queued",
  "nothing_leasable",
  // a subworkflow chain's depth check, answered at publish as `depth_exceeded` or `unknown_workflow`
  "workflow_cycle",
  "subworkflow_unresolvable",
  // services and stores: a read's or a send's result, turned into an answer or a 503
  "read",
  "missing",
  "corrupt",
  "unavailable",
  "held",
  "live",
  "not_stored",
  "charged",
  // a child's start gate as its tenant's record reads (actors/run/actor.ts): its refusals are codes of their own
  "open",
  // the tool gateway and the tool step, between the executor and the run
  "failed",
  "succeeded",
  "task",
  "working",
  "input_required",
  "valid",
  "invalid",
  "not_found",
  // zod's issue code in a refinement (`ctx.addIssue`)
  "custom",
]);

/** The first-column names of the tables under `## <heading>` in a docs page. */
function documented(page: string, heading: string): string[] {
  const text = readFileSync(join(ROOT, "docs", page), "utf8");
  const start = text.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`docs/${page} has no "## ${heading}" section`);
  const end = text.indexOf("\n## ", start + 1);
  const section = text.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]!);
}

const missing = (want: Iterable<string>, have: Set<string>) => [...want].filter((x) => !have.has(x)).sort();

describe("the reference pages list what the system emits", () => {
  it("every event type the code publishes is in docs/events.md, and every one there is published", () => {
    const { types, unresolved } = emittedEventTypes();
    expect(unresolved, "a publish whose event type this test cannot read").toEqual([]);
    expect(types.size, "the scan found the run's event publishers").toBeGreaterThan(20);
    const docs = new Set(documented("events.md", "Event types"));
    expect(missing(types, docs), "published but not in docs/events.md").toEqual([]);
    expect(missing(docs, types), "in docs/events.md but never published").toEqual([]);
    expect(types).toContain("run_cancel_requested");
  });

  it("every code and outcome the code answers with is in a reference table, and every one there exists", () => {
    const emitted = emittedCodes();
    const tables = [
      documented("api.md", "Outcomes"),
      documented("events.md", "Error codes"),
      documented("definitions.md", "Publish errors"),
      documented("operations.md", "Dead letters"),
      documented("models.md", "Failure codes"),
      documented("models.md", "Stop reasons"),
    ];
    const docs = new Set(tables.flat());
    expect(
      missing(
        [...emitted].filter((c) => !INTERNAL.has(c)),
        docs,
      ),
      "emitted but in no reference table",
    ).toEqual([]);
    const everywhere = new Set(ALL.flatMap((s) => literals(s.text)));
    expect(missing(docs, everywhere), "documented but no source names it").toEqual([]);
    expect(missing(INTERNAL, everywhere), "listed as internal but no source names it").toEqual([]);
    expect([...INTERNAL].filter((c) => docs.has(c)).sort(), "listed as internal and documented as an answer").toEqual([]);
    expect(docs).toContain("stopped");
  });

  it("every source file the README and docs/ name exists", () => {
    const pages = ["README.md", ...readdirSync(join(ROOT, "docs")).map((f) => `docs/${f}`)].filter((f) => f.endsWith(".md"));
    const named = pages.flatMap((page) =>
      [...readFileSync(join(ROOT, page), "utf8").matchAll(/`((?:bin|cluster|machines|runtime|actors|gateways|scripts|test)\/[\w./-]+\.(?:ts|mjs|md))`/g)].map(
        (m) => `${page}: ${m[1]}`,
      ),
    );
    expect(named.length).toBeGreaterThan(10);
    expect(named.filter((n) => !existsSync(join(ROOT, n.split(": ")[1]!)))).toEqual([]);
  });
});
