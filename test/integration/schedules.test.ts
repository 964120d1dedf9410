// Schedules through the API against a real node and a real nats-server: put, list, get, pause,
// resume, delete; the typed refusals; firings of a one-second schedule as runs whose start key is
// the due time; and C012 (a daily trigger's firings on two days, by an injected clock, never meet).
import { describe, expect, it } from "vitest";
import { runIdFor, startKey } from "../../actors/index.js";
import { createLogger } from "../../runtime/index.js";
import { firingStart, ScheduleFirer, ScheduleStore, type ScheduleRecord } from "../../gateways/schedules/index.js";
import { fileURLToPath } from "node:url";
import { RUNWAY_USER, spawnTsx, waitFor } from "../harness/index.js";
import { workflowWorld, type RunAnswer } from "./workflow-support.js";

const world = workflowWorld({ name: "sched-node" });

async function publishEcho(name = "echo-flow"): Promise<void> {
  const put = await world.client.putDefinition({ name, nodes: [{ id: "e", kind: "code", handler: "echo", input: "${input}" }] });
  expect(["published", "unchanged"]).toContain(put.outcome);
}

/** The run a schedule's firing at `due` makes: its id is derived from (tenant, start key), the key from the due time. */
function firingRun(tenant: string, name: string, due: number): string {
  return runIdFor(tenant, startKey(`schedule:${name}`, new Date(due).toISOString()));
}

describe("schedules API", () => {
  it("put, get, list, pause, resume and delete a schedule", async () => {
    await publishEcho();
    const c = world.client;
    const put = await c.putSchedule({ name: "hourly", definition: "echo-flow", input: { x: 1 }, cron: { expr: "0 * * * *", tz: "Europe/Paris" } });
    expect(put.outcome, JSON.stringify(put)).toBe("saved");
    const view = put.schedule as { next_due_at: number; missed: unknown; paused: boolean; fired: number; cron: { tz: string } };
    expect(view).toMatchObject({ missed: "skip", paused: false, fired: 0, cron: { tz: "Europe/Paris" } });
    expect(view.next_due_at % 3_600_000).toBe(0);
    expect(view.next_due_at).toBeGreaterThan(Date.now());
    expect((await c.getSchedule("hourly")).outcome).toBe("found");
    const listed = await c.listSchedules();
    expect((listed.schedules as { name: string }[]).map((s) => s.name)).toContain("hourly");
    const paused = await c.pauseSchedule("hourly");
    expect(paused).toMatchObject({ outcome: "paused", schedule: { paused: true, next_due_at: null } });
    expect((await c.pauseSchedule("hourly")).outcome).toBe("paused");
    expect(await c.resumeSchedule("hourly")).toMatchObject({ outcome: "resumed", schedule: { paused: false } });
    // Another tenant neither sees nor reaches it.
    expect((await world.clientFor("t2").getSchedule("hourly")).outcome).toBe("schedule_not_found");
    expect((await c.deleteSchedule("hourly")).outcome).toBe("deleted");
    expect((await c.getSchedule("hourly")).outcome).toBe("schedule_not_found");
    expect((await c.deleteSchedule("hourly")).outcome).toBe("schedule_not_found");
    expect((await c.pauseSchedule("hourly")).outcome).toBe("schedule_not_found");
  });

  it("bad schedules answer typed codes and store nothing", async () => {
    await publishEcho();
    const c = world.client;
    const base = { name: "bad", definition: "echo-flow" };
    expect(await c.putSchedule({ ...base, cron: { expr: "61 * * * *" } })).toMatchObject({ outcome: "invalid_cron" });
    expect(await c.putSchedule({ ...base, cron: { expr: "0 9 * * *", tz: "Mars/Olympus_Mons" } })).toMatchObject({ outcome: "unknown_time_zone" });
    expect(await c.putSchedule({ ...base, definition: "no-such-flow", every: { ms: 60_000 } })).toMatchObject({ outcome: "definition_not_found" });
    expect(await c.putSchedule({ ...base, every: { ms: 60_000 }, cron: { expr: "* * * * *" } })).toMatchObject({ outcome: "invalid_input" });
    expect(await c.putSchedule({ ...base, every: { ms: 10 } })).toMatchObject({ outcome: "invalid_input" });
    expect(await c.putSchedule({ ...base, every: { ms: 60_000 }, lane: "interactive" })).toMatchObject({ outcome: "lane_not_allowed" });
    expect((await c.getSchedule("bad")).outcome).toBe("schedule_not_found");
    // A caller cannot claim a schedule's start keys.
    const forged = await c.startRun({ definition: "echo-flow", start_key: { source: "schedule:tick", delivery_id: "2027-01-01T00:00:00.000Z" } });
    expect(forged.outcome).toBe("invalid_input");
  });

  it("a one-second schedule starts one run per due time, keyed by it, with its input; paused, it starts none", async () => {
    await publishEcho();
    const c = world.client;
    const put = await c.putSchedule({ name: "tick", definition: "echo-flow", input: { hello: "world" }, every: { ms: 1_000 } });
    expect(put.outcome).toBe("saved");
    const anchor = (put.schedule as { created_at: number }).created_at;
    const firstTwo = [anchor + 1_000, anchor + 2_000].map((due) => firingRun("t1", "tick", due));
    const runs = await waitFor(
      async () => {
        const got = await Promise.all(firstTwo.map((id) => c.getRun(id)));
        return got.every((g) => g.outcome === "found") ? got.map((g) => g.run as RunAnswer) : undefined;
      },
      { timeoutMs: 15_000, describe: "the first two firings' runs" },
    );
    for (const run of runs) expect((await world.settled(run.id)).result).toEqual({ e: { hello: "world" } });
    const paused = await c.pauseSchedule("tick");
    const firedWhenPaused = (paused.schedule as { fired: number }).fired;
    await new Promise((r) => setTimeout(r, 2_200));
    const later = (await c.getSchedule("tick")).schedule as { fired: number; last: { outcome: string } };
    expect(later.fired).toBe(firedWhenPaused);
    expect(later.last.outcome).toBe("started");
    // The node counts its firings, by the start's answer.
    const reply = await world.nc.request("runway.v1.ops.metrics", "", { timeout: 5_000 });
    const metrics = (JSON.parse(reply.string()) as { metrics: Record<string, Record<string, number>> }).metrics;
    expect(metrics.schedule_firings?.["tenant=t1,outcome=started"]).toBeGreaterThanOrEqual(2);
    expect((await c.deleteSchedule("tick")).outcome).toBe("deleted");
  });
});

const cli = fileURLToPath(new URL("../../cluster/cli.ts", import.meta.url));

async function runway(args: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawnTsx(cli, [...args, "--servers", world.server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass, "--tenant", "t1"], {
    name: `runway ${args[0]}`,
  });
  const exit = await child.exited;
  return { code: exit.code, out: child.lines.join("\n") };
}

describe("runway schedules", () => {
  it("put with a cron and a time zone, ls, pause, resume, rm; a bad cron exits 1 with its code, a command line without a timing exits 2", async () => {
    await publishEcho();
    const put = await runway([
      "schedules",
      "put",
      "nightly",
      "--definition",
      "echo-flow",
      "--cron",
      "0 2 * * *",
      "--tz",
      "Europe/Paris",
      "--catch-up",
      "2",
      "--input",
      '{"a":1}',
    ]);
    expect(put.code, put.out).toBe(0);
    expect(put.out).toContain('"saved"');
    expect((await world.client.getSchedule("nightly")).schedule).toMatchObject({
      cron: { expr: "0 2 * * *", tz: "Europe/Paris" },
      missed: { catch_up: 2 },
      input: { a: 1 },
    });
    expect((await runway(["schedules", "ls"])).out).toContain('"name": "nightly"');
    expect((await runway(["schedules", "pause", "nightly"])).out).toContain('"paused"');
    expect((await runway(["schedules", "resume", "nightly"])).out).toContain('"resumed"');
    const bad = await runway(["schedules", "put", "broken", "--definition", "echo-flow", "--cron", "99 * * * *"]);
    expect(bad.code, bad.out).toBe(1);
    expect(bad.out).toContain('"invalid_cron"');
    const neither = await runway(["schedules", "put", "broken", "--definition", "echo-flow"]);
    expect(neither.code, neither.out).toBe(2);
    expect((await runway(["schedules", "rm", "nightly"])).code).toBe(0);
    expect((await runway(["schedules", "get", "nightly"])).code).toBe(1);
  });
});

describe("contract rows", () => {
  it("C012 a daily trigger starts a new run every day; its key never collides with yesterday's", async () => {
    await publishEcho();
    const c = world.client;
    expect((await c.putSchedule({ name: "daily", definition: "echo-flow", cron: { expr: "0 9 * * *", tz: "UTC" } })).outcome).toBe("saved");
    // Two days ahead of the wall clock, by an injected clock: 09:00:05 UTC on each.
    const day = 86_400_000;
    const nineToday = Math.floor(Date.now() / day) * day + 9 * 3_600_000;
    const day1 = nineToday + 2 * day;
    const day2 = day1 + day;
    const store = new ScheduleStore(world.nc);
    const firer = new ScheduleFirer({
      store,
      owns: () => true,
      start: (tenant, request) => world.node.runs.start(tenant, request),
      clock: { now: () => day1 - 3_600_000, monotonic: () => performance.now() },
      logger: createLogger("c012", "error"),
    });
    await firer.start();
    try {
      // Once its watch knows the schedule, a look at 09:00:05 on day 1 starts that day's firing (the
      // loop's own looks, an hour earlier by its clock, find nothing due).
      await waitFor(async () => (await firer.pass(day1 + 5_000)).started.started === 1, { timeoutMs: 10_000, describe: "day 1's firing" });
      // The same day looked at again starts nothing new.
      expect((await firer.pass(day1 + 6_000)).started).toEqual({});
      const afterDay2 = await firer.pass(day2 + 5_000);
      expect(afterDay2.started).toEqual({ started: 1 });
    } finally {
      await firer.stop();
    }
    const [run1, run2] = [firingRun("t1", "daily", day1), firingRun("t1", "daily", day2)];
    expect(run1).not.toBe(run2);
    expect(startKey("schedule:daily", new Date(day1).toISOString())).not.toBe(startKey("schedule:daily", new Date(day2).toISOString()));
    for (const id of [run1, run2]) expect((await world.settled(id)).status).toBe("succeeded");
    // Day 1's firing started again (a crash before its cursor moved) is the same run.
    const record = (await store.read("t1.daily"))!.record as ScheduleRecord;
    expect(record.fired).toBe(2);
    const again = await world.node.runs.start("t1", firingStart(record, day1));
    expect(again.outcome).toBe("duplicate");
    expect((again as { run: { id: string } }).run.id).toBe(run1);
    expect((await c.deleteSchedule("daily")).outcome).toBe("deleted");
  });
});
