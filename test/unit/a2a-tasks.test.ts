import { describe, expect, it } from "vitest";
import { Part, TaskState } from "@a2a-js/sdk";
import type { RunView } from "../../actors/index.js";
import { inputOf, stateOf, taskOf } from "../../gateways/a2a/tasks.js";

const part = (json: unknown) => Part.fromJSON(json);

function run(over: Partial<RunView>): RunView {
  return {
    id: "t1_x",
    tenant: "t1",
    status: "running",
    definition: { name: "d", version: 1, digest: "x" },
    root_run_id: "t1_x",
    parent_run_id: null,
    created_at: 1_000,
    started_at: 2_000,
    ended_at: null,
    lane: "batch",
    input: {},
    waiting: null,
    result: null,
    result_truncated: false,
    error: null,
    nodes: {},
    cancel: null,
    ...over,
  } as RunView;
}

describe("a message's parts as a run's input", () => {
  it("data parts are merged, a non-object data value is { data }, text parts are { text } joined by newlines", () => {
    expect(inputOf([part({ data: { a: 1 } }), part({ data: { b: 2 } })])).toEqual({ ok: true, input: { a: 1, b: 2 } });
    expect(inputOf([part({ data: [1, 2] })])).toEqual({ ok: true, input: { data: [1, 2] } });
    expect(inputOf([part({ text: "one" }), part({ text: "two" })])).toEqual({ ok: true, input: { text: "one\ntwo" } });
    expect(inputOf([part({ data: { a: 1 } }), part({ text: "why" })])).toEqual({ ok: true, input: { a: 1, text: "why" } });
  });

  it("files, URLs and other media types are not taken (ContentTypeNotSupported); no part or an empty one is invalid", () => {
    expect(inputOf([part({ raw: "AAAA" })])).toMatchObject({ ok: false, unsupported: true });
    expect(inputOf([part({ url: "http://x/y.pdf" })])).toMatchObject({ ok: false, unsupported: true });
    expect(inputOf([part({ text: "x", mediaType: "image/png" })])).toMatchObject({ ok: false, unsupported: true });
    expect(inputOf([])).toMatchObject({ ok: false, unsupported: false });
    expect(inputOf([part({})])).toMatchObject({ ok: false, unsupported: false });
  });
});

describe("a run's state as its task's", () => {
  it("queued, running and a timer wait work; a person's wait requires input; the ends are completed, failed, canceled", () => {
    expect(stateOf(run({ status: "queued" }))).toBe(TaskState.TASK_STATE_WORKING);
    expect(stateOf(run({ status: "running" }))).toBe(TaskState.TASK_STATE_WORKING);
    expect(stateOf(run({ status: "waiting", waiting: { on: "delay", ref: "n", expires_at: 1 } }))).toBe(TaskState.TASK_STATE_WORKING);
    expect(stateOf(run({ status: "waiting", waiting: { on: "approval", ref: "t1_x:n", expires_at: 1 } }))).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(stateOf(run({ status: "waiting", waiting: { on: "event", ref: "n", expires_at: 1 } }))).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(stateOf(run({ status: "succeeded" }))).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(stateOf(run({ status: "failed" }))).toBe(TaskState.TASK_STATE_FAILED);
    expect(stateOf(run({ status: "cancelled" }))).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it("a start its tenant refused is a rejected task with no run; the result is the one artifact, text for a string", () => {
    const record = { context_id: "c", message_id: "m", created_at: 1 };
    expect(taskOf("t1_x", { ...record, rejected: { code: "tenant_killed", at: 5 } }, undefined).status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    const done = taskOf("t1_x", record, run({ status: "succeeded", ended_at: 3_000, result: "hello" }));
    expect(done.artifacts.map((a) => [a.artifactId, a.parts[0]!.content])).toEqual([["result", { $case: "text", value: "hello" }]]);
    expect(done.status?.timestamp).toBe(new Date(3_000).toISOString());
    expect(taskOf("t1_x", record, run({ status: "succeeded", result: { n: 1 } })).artifacts[0]!.parts[0]!.content).toEqual({ $case: "data", value: { n: 1 } });
  });
});
