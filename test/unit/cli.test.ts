// The `runway` command's checks and failure lines, in process: a command line is checked whole
// before anything is connected, and each failure is one line with its exit code.
import { describe, expect, it } from "vitest";
import { ApiFault, ApiNoAnswer, type ApiAnswer, type RunwayClient } from "../../cluster/client.js";
import { approvalsCommand } from "../../cluster/cli-approvals.js";
import { connectFailure, describeFailure, EXIT, UsageError } from "../../cluster/cli-errors.js";
import { runCommand } from "../../cluster/cli-runs.js";
import { toolsCommand } from "../../cluster/cli-tools.js";

const INPUT_ITEM = "t1_ab:pay:input.bank/confirm_charge.1";

/** A client that records the decisions it is asked to send and answers them `decided`. */
function recordingClient(): { client: RunwayClient; sent: unknown[][] } {
  const sent: unknown[][] = [];
  const client = {
    decide: (...args: unknown[]): Promise<ApiAnswer> => {
      sent.push(args);
      return Promise.resolve({ outcome: "decided" });
    },
  } as unknown as RunwayClient;
  return { client, sent };
}

function usageOf(check: () => unknown): UsageError {
  try {
    check();
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  throw new Error("expected a UsageError");
}

describe("a command line is checked before anything is connected", () => {
  it("run: a missing id or name, a value that is not JSON, a lane or key of the wrong form", () => {
    expect(usageOf(() => runCommand("t1", "get", [], {})).message).toBe("run get <id>: which run? (missing <id>)");
    expect(usageOf(() => runCommand("t1", "start", [], {})).command).toBe("run");
    expect(usageOf(() => runCommand("t1", "signal", ["t1_x"], {})).message).toMatch(/missing <name>/);
    expect(usageOf(() => runCommand("t1", "start", ["flow"], { input: "{" })).message).toMatch(/^--input "\{" is not JSON/);
    expect(usageOf(() => runCommand("t1", "start", ["flow"], { lane: "fast" })).message).toBe("--lane fast: expected interactive, batch or migration");
    expect(usageOf(() => runCommand("t1", "start", ["flow"], { key: "nocolon" })).message).toBe("--key nocolon: expected SOURCE:DELIVERY");
    expect(usageOf(() => runCommand("t1", "list", [], { limit: "0" })).message).toBe("--limit 0: expected a positive integer");
    expect(usageOf(() => runCommand("t1", "reconcile", ["t1_x"], { key: "k", decision: "maybe" })).message).toMatch(/--decision done\|retry\|abandon/);
    expect(usageOf(() => runCommand("t1", "nope", [], {})).message).toMatch(/^unknown subcommand: run nope/);
    expect(typeof runCommand("t1", "start", ["flow"], { input: '{"a":1}', key: "cli:1:2", lane: "batch" })).toBe("function");
  });

  it("tools: a server file that is not there, arguments that are not a JSON object", () => {
    expect(usageOf(() => toolsCommand("servers", ["put", "/nonexistent/fx.json"], {})).message).toBe("cannot read /nonexistent/fx.json: no such file");
    expect(usageOf(() => toolsCommand("call", ["fx", "charge"], { args: "[1]" })).message).toBe("--args must be a JSON object");
    expect(usageOf(() => toolsCommand("call", ["fx"], {})).command).toBe("tools");
  });

  it("approvals: approve carries an input item's form content, edit its new payload, reject none; a payload approve would ignore is refused", async () => {
    const { client, sent } = recordingClient();
    await approvalsCommand("approve", INPUT_ITEM, { payload: '{"ok":true}', by: "bob" })(client);
    await approvalsCommand("approve", "t1_ab:gate", { by: "bob" })(client);
    await approvalsCommand("edit", "t1_ab:pay:approval.bank/charge", { payload: '{"amount":1}', by: "bob" })(client);
    await approvalsCommand("reject", INPUT_ITEM, { reason: "no", by: "bob" })(client);
    expect(sent).toEqual([
      [INPUT_ITEM, "approve", { payload: { ok: true }, by: "bob" }],
      ["t1_ab:gate", "approve", { by: "bob" }],
      ["t1_ab:pay:approval.bank/charge", "edit", { payload: { amount: 1 }, by: "bob" }],
      [INPUT_ITEM, "reject", { reason: "no", by: "bob" }],
    ]);
    expect(usageOf(() => approvalsCommand("approve", "t1_ab:gate", { payload: "{}" })).message).toMatch(/only a request for input is approved with content/);
    expect(usageOf(() => approvalsCommand("edit", "t1_ab:gate", {})).message).toMatch(/^approvals edit <id> --payload JSON/);
    expect(usageOf(() => approvalsCommand("reject", INPUT_ITEM, { payload: "{}" })).message).toMatch(/reject carries no payload/);
    expect(usageOf(() => approvalsCommand("approve", INPUT_ITEM, { payload: "{}", "payload-file": "f.json" })).message).toMatch(/one or the other/);
    expect(usageOf(() => approvalsCommand("approve", undefined, {})).message).toMatch(/missing <id>/);
  });
});

describe("each failure is one line and an exit code", () => {
  const at = { command: "run", servers: "nats://10.0.0.5:4222" };
  it.each([
    [new UsageError("run get <id>: which run? (missing <id>)", "run"), EXIT.usage, "run get <id>: which run? (missing <id>) (usage: runway run --help)"],
    [
      new ApiNoAnswer("runway.v1.t1.runs.get", "no_responders", 15_000),
      EXIT.unreachable,
      /^no Runway node serves runway\.v1\.t1\.runs\.get at nats:\/\/10\.0\.0\.5:4222: start one/,
    ],
    [
      new ApiNoAnswer("runway.v1.t1.runs.get", "timeout", 15_000),
      EXIT.unreachable,
      /^no answer to runway\.v1\.t1\.runs\.get at nats:\/\/10\.0\.0\.5:4222 within 15 s/,
    ],
    [new ApiNoAnswer("runway.v1.t1.runs.get", "closed", 15_000), EXIT.unreachable, /closed before the answer came; try again$/],
    [new ApiNoAnswer("runway.v1.t1.definitions.put", "too_large", 15_000), EXIT.usage, /is larger than the NATS server at .* accepts/],
    [new ApiFault(503, "decide_unavailable: not confirmed"), EXIT.refused, "the service failed (503, retrying may help): decide_unavailable: not confirmed"],
    [
      Object.assign(new TypeError("Unknown option '--wat'. To specify a positional argument…"), { code: "ERR_PARSE_ARGS_UNKNOWN_OPTION" }),
      EXIT.usage,
      "Unknown option '--wat' (usage: runway run --help)",
    ],
    [
      Object.assign(new Error("Authorization Violation"), { name: "AuthorizationError" }),
      EXIT.unreachable,
      /^NATS at nats:\/\/10\.0\.0\.5:4222 refused the credentials/,
    ],
    [new Error("first\nsecond"), EXIT.refused, "first second (RUNWAY_DEBUG=1 prints the stack)"],
  ] as const)("%s", (err, code, line) => {
    const described = describeFailure(err, at);
    expect(described.code).toBe(code);
    expect(described.line).not.toContain("\n");
    if (typeof line === "string") expect(described.line).toBe(line);
    else expect(described.line).toMatch(line);
  });

  it("a refused connection names the URL and how to start or point at a server; refused credentials name the user", () => {
    const refused = Object.assign(new Error("connection refused", { cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }) }), {
      name: "ConnectionError",
    });
    expect(connectFailure(refused, "nats://127.0.0.1:4222", undefined).message).toBe(
      "cannot reach NATS at nats://127.0.0.1:4222 (connection refused): start one with `runway dev`, or point --servers (env RUNWAY_SERVERS) at yours",
    );
    const auth = Object.assign(new Error("Authorization Violation"), { name: "AuthorizationError" });
    expect(connectFailure(auth, "nats://h:4222", "alice").message).toBe(
      'NATS at nats://h:4222 refused the credentials of user "alice": check --user and --pass',
    );
  });
});
