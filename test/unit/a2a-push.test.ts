import { describe, expect, it } from "vitest";
import { TaskState } from "@a2a-js/sdk";
import { messageConfigId, PushSettingsSchema } from "../../gateways/a2a/push-configs.js";
import { stateAfter } from "../../gateways/a2a/push.js";

const event = (type: string, extra: Record<string, unknown> = {}) => ({ id: "1", type, run: "t1_x", at: 0, ...extra });

describe("39.1 push: a task's state, event by event of its run's journal", () => {
  const { TASK_STATE_WORKING: W, TASK_STATE_INPUT_REQUIRED: I, TASK_STATE_COMPLETED: C, TASK_STATE_FAILED: F, TASK_STATE_CANCELED: X } = TaskState;
  it.each([
    ["run_queued", {}, undefined, W],
    ["run_started", {}, undefined, W],
    ["run_waiting", { on: "approval" }, W, I],
    ["run_waiting", { on: "event" }, W, I],
    ["run_waiting", { on: "delay" }, W, W],
    ["approval_decided", {}, I, W],
    ["signal_received", {}, I, W],
    ["approval_expired", {}, I, W],
    ["approval_decided", {}, W, W],
    ["step_started", {}, I, I],
    ["step_succeeded", {}, W, W],
    ["run_succeeded", {}, W, C],
    ["run_failed", {}, I, F],
    ["run_cancelled", {}, I, X],
  ] as const)("%s %j after %s is %s", (type, extra, before, after) => {
    expect(stateAfter(event(type, extra), before)).toBe(after);
  });
});

describe("39.1 push: a config's settings", () => {
  it.each([
    "https://example.com/hook",
    "https://example.com:8443/a/b?c=d",
    "http://127.0.0.1:9000/hook",
    "http://localhost/hook",
    "http://[::1]:80/hook",
    "http://127.1.2.3/x",
  ])("takes %s", (url) => {
    expect(PushSettingsSchema.safeParse({ url }).success).toBe(true);
  });
  it.each([
    "",
    "not a url",
    "ftp://example.com/x",
    "http://example.com/hook",
    "http://10.0.0.1/hook",
    "http://127.0.0.1.example.com/hook",
    "https://user:pw@example.com/hook",
    "file:///etc/passwd",
    `https://example.com/${"x".repeat(2100)}`,
  ])("refuses the url %j", (url) => {
    expect(PushSettingsSchema.safeParse({ url }).success).toBe(false);
  });
  it("refuses a bad id, token or authentication", () => {
    const url = "https://example.com/hook";
    expect(PushSettingsSchema.safeParse({ url, id: "a b" }).success).toBe(false);
    expect(PushSettingsSchema.safeParse({ url, id: "x".repeat(65) }).success).toBe(false);
    expect(PushSettingsSchema.safeParse({ url, token: "has space" }).success).toBe(false);
    expect(PushSettingsSchema.safeParse({ url, token: "line\nbreak" }).success).toBe(false);
    expect(PushSettingsSchema.safeParse({ url, authentication: { scheme: "Bearer x", credentials: "c" } }).success).toBe(false);
    expect(PushSettingsSchema.safeParse({ url, authentication: { scheme: "Bearer", credentials: "a\r\nX-Evil: 1" } }).success).toBe(false);
    expect(PushSettingsSchema.safeParse({ url, id: "ok_1-2", token: "t0k", authentication: { scheme: "Bearer", credentials: "abc.def" } }).success).toBe(true);
  });
  it("a SendMessage's config without an id gets one from its message id: the same for a resend", () => {
    expect(messageConfigId("m-1")).toBe(messageConfigId("m-1"));
    expect(messageConfigId("m-1")).not.toBe(messageConfigId("m-2"));
    expect(messageConfigId("m-1")).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
  });
});
