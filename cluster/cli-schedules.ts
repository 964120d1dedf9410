/**
 * `runway schedules …`: the tenant's schedules (docs/schedules.md).
 *
 *   runway schedules put <name> --definition D (--cron EXPR [--tz TZ] | --every-ms MS) [--input JSON] [--catch-up N] [--lane L] [--project P] [--paused]
 *   runway schedules get <name> | ls | rm <name> | pause <name> | resume <name>
 */
import type { RunwayClient } from "./client.js";
import { jsonFlag, positiveInt } from "./cli-args.js";
import { answered, UsageError, type Done } from "./cli-errors.js";

/** What a checked `runway schedules` command does once connected. */
export type SchedulesAction = (client: RunwayClient) => Promise<Done>;

export const SCHEDULES_OPTIONS = {
  definition: { type: "string" as const },
  cron: { type: "string" as const },
  tz: { type: "string" as const },
  "every-ms": { type: "string" as const },
  input: { type: "string" as const },
  "catch-up": { type: "string" as const },
  lane: { type: "string" as const },
  project: { type: "string" as const },
  paused: { type: "boolean" as const, default: false },
};

type Values = {
  definition?: string;
  cron?: string;
  tz?: string;
  "every-ms"?: string;
  input?: string;
  "catch-up"?: string;
  lane?: string;
  project?: string;
  paused?: boolean;
};

function usage(message: string): UsageError {
  return new UsageError(message, "schedules");
}

/** The schedule a `put` sends; the service checks the rest (a cron it reads, a known time zone, the definition). */
function scheduleOf(name: string, values: Values): Record<string, unknown> {
  if (!values.definition) throw usage("schedules put <name> --definition D: which definition?");
  if ((values.cron === undefined) === (values["every-ms"] === undefined)) throw usage("schedules put: exactly one of --cron EXPR and --every-ms MS");
  if (values.tz !== undefined && values.cron === undefined) throw usage("schedules put: --tz goes with --cron");
  const every = positiveInt("schedules", "--every-ms", values["every-ms"]);
  const catchUp = positiveInt("schedules", "--catch-up", values["catch-up"]);
  return {
    name,
    definition: values.definition,
    ...(values.input !== undefined ? { input: jsonFlag("schedules", "--input", values.input) } : {}),
    ...(values.cron !== undefined ? { cron: { expr: values.cron, ...(values.tz ? { tz: values.tz } : {}) } } : {}),
    ...(every !== undefined ? { every: { ms: every } } : {}),
    ...(catchUp !== undefined ? { missed: { catch_up: catchUp } } : {}),
    ...(values.lane ? { lane: values.lane } : {}),
    ...(values.project ? { project: values.project } : {}),
    ...(values.paused ? { paused: true } : {}),
  };
}

/** Checks `runway schedules <sub> …` and answers what it does; a wrong command line throws a UsageError. */
export function schedulesCommand(sub: string | undefined, positionals: string[], values: Values): SchedulesAction {
  const [name] = positionals;
  if (sub === "ls") return async (client) => answered("schedules ls", await client.listSchedules());
  if (sub === undefined || !["put", "get", "rm", "pause", "resume"].includes(sub))
    throw usage(sub ? `unknown subcommand: schedules ${sub} (put, get, ls, rm, pause, resume)` : "which one? schedules put|get|ls|rm|pause|resume");
  if (!name) throw usage(`schedules ${sub} <name>: which schedule?`);
  switch (sub) {
    case "put": {
      const schedule = scheduleOf(name, values);
      return async (client) => answered("schedules put", await client.putSchedule(schedule));
    }
    case "get":
      return async (client) => answered("schedules get", await client.getSchedule(name));
    case "rm":
      return async (client) => answered("schedules rm", await client.deleteSchedule(name));
    case "pause":
      return async (client) => answered("schedules pause", await client.pauseSchedule(name));
    default:
      return async (client) => answered("schedules resume", await client.resumeSchedule(name));
  }
}
