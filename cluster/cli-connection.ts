/**
 * Where and as whom a `runway` command connects (the flags every connected command shares), and
 * the tenant id it speaks for, checked before anything is sent or started.
 */
import { readFileSync } from "node:fs";
import type { ConnectionConfig } from "../runtime/index.js";
import { TenantIdSchema } from "../machines/index.js";
import { UsageError } from "./cli-errors.js";

export const common = {
  servers: { type: "string" as const, default: process.env.RUNWAY_SERVERS ?? "nats://127.0.0.1:4222" },
  user: { type: "string" as const },
  pass: { type: "string" as const },
  nkey: { type: "string" as const, default: process.env.RUNWAY_NKEY },
  tenant: { type: "string" as const, default: process.env.RUNWAY_TENANT ?? "demo" },
};

export type ConnectionFlags = { servers?: string; user?: string; pass?: string; nkey?: string };

/** The NATS URLs the command was pointed at, for the line that says it could not reach them. */
let target: string | undefined;

/** The NATS URLs the last `connection` was made for; undefined before any. */
export function connectionTarget(): string | undefined {
  return target;
}

/** Where and as whom to connect: `--user`/`--pass`, or `--nkey FILE`, a seed file `runway creds` (or `runway dev`) wrote. */
export function connection(values: ConnectionFlags): ConnectionConfig {
  target = values.servers;
  return {
    servers: (values.servers ?? "").split(","),
    ...(values.user ? { user: values.user, pass: values.pass ?? "" } : {}),
    ...(values.nkey ? { nkeySeed: seedFile(values.nkey) } : {}),
  };
}

function seedFile(path: string): string {
  let seed: string;
  try {
    seed = readFileSync(path, "utf8").trim();
  } catch (err) {
    throw new UsageError(`--nkey ${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  if (!/^SU[A-Z2-7]{56}$/.test(seed)) throw new UsageError(`--nkey ${path}: not a user NKey seed (a line starting SU, as \`runway creds\` writes)`);
  return seed;
}

/** A tenant id by the API's own rule, refused here before anything is sent or started. */
export function tenantId(value: string, what: string, command?: string): string {
  const parsed = TenantIdSchema.safeParse(value);
  if (!parsed.success) throw new UsageError(`${what} ${JSON.stringify(value)}: ${parsed.error.issues.map((i) => i.message).join("; ")}`, command);
  return parsed.data;
}
