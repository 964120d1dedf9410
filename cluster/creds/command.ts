/**
 * `runway creds init|add|revoke|ls --dir DIR …`: the deployment's NATS credentials
 * (docs/security.md). `init` lists every identity (and revokes any other), `add` and `revoke`
 * change the list the directory holds; each writes the seeds and `auth.conf` and says how to load it.
 */
import { dirname, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { CredsSpec, CredsUser } from "./plan.js";
import { readIdentities, specOf, writeCredentials, type WriteCredsResult } from "./store.js";

export const CREDS_USAGE = `  creds init --dir DIR [--tenant T]… [--user T:NAME[:GROUP,…]]… [--operator NAME]… [--admin NAME]… [--node NAME]… [--server-config FILE]
                                                                exactly these identities: seeds made or kept, any other revoked
  creds add|revoke --dir DIR [--tenant T]… [--user T:NAME[:GROUP,…]]… [--operator NAME]… [--admin NAME]… [--node NAME]… [--server-config FILE]
  creds ls --dir DIR                                            who holds a key: role, name, public key, seed file`;

export interface CredsIo {
  out(line: string): void;
  err(line: string): void;
}

const stdio: CredsIo = { out: (l) => process.stdout.write(`${l}\n`), err: (l) => process.stderr.write(`${l}\n`) };

const OPTIONS = {
  dir: { type: "string" },
  "server-config": { type: "string" },
  tenant: { type: "string", multiple: true },
  user: { type: "string", multiple: true },
  operator: { type: "string", multiple: true },
  admin: { type: "string", multiple: true },
  node: { type: "string", multiple: true },
} as const;

type Values = { dir?: string; "server-config"?: string; tenant?: string[]; user?: string[]; operator?: string[]; admin?: string[]; node?: string[] };

function listed(values: Values): Required<CredsSpec> | string {
  const users: CredsUser[] = [];
  for (const u of values.user ?? []) {
    const [tenant, name, groups, ...rest] = u.split(":");
    if (!tenant || !name || rest.length > 0) return `--user ${u}: expected TENANT:NAME or TENANT:NAME:GROUP,GROUP`;
    users.push({ tenant, name, ...(groups ? { groups: groups.split(",") } : {}) });
  }
  return { tenants: values.tenant ?? [], users, operators: values.operator ?? [], admins: values.admin ?? [], nodes: values.node ?? [] };
}

function merge(a: Required<CredsSpec>, b: Required<CredsSpec>, keep: boolean): Required<CredsSpec> {
  const names = (x: readonly string[], y: readonly string[]) => (keep ? [...new Set([...x, ...y])] : x.filter((n) => !y.includes(n)));
  const key = (u: CredsUser) => `${u.tenant}:${u.name}`;
  const dropped = new Set(keep ? [] : b.users.map(key));
  const tenants = names(a.tenants, b.tenants);
  // Added again, a user takes the groups it is listed with now.
  const users = keep ? [...a.users.filter((u) => !b.users.some((v) => key(v) === key(u))), ...b.users] : a.users.filter((u) => !dropped.has(key(u)));
  return {
    tenants,
    // A revoked tenant takes its users with it.
    users: users.filter((u) => tenants.includes(u.tenant)),
    operators: names(a.operators, b.operators),
    admins: names(a.admins, b.admins),
    nodes: names(a.nodes, b.nodes),
  };
}

function report(result: WriteCredsResult, serverConfig: string | undefined, io: CredsIo): number {
  if (result.outcome === "invalid") {
    for (const p of result.problems) io.err(p);
    return 2;
  }
  for (const f of result.created) io.out(`created ${f}`);
  for (const f of result.revoked) io.out(`revoked ${f}`);
  // nats-server resolves an include against the including file's directory, never as an absolute path.
  const include = relative(dirname(resolve(serverConfig ?? "nats-server.conf")), result.authConfig);
  io.out(
    `wrote ${result.authConfig}: add \`include "${include}"\` to ${serverConfig ?? "a nats-server config in this directory"}, then reload the server (SIGHUP, or nats-server --signal reload=PID; twice after adding a tenant: docs/security.md)`,
  );
  io.out(`the nats CLI: nats --nkey ${resolve(result.dir, "tenants/<tenant>.nk")} req runway.v1.<tenant>.runs.list '{}'`);
  return 0;
}

/** The exit code: 0 done, 2 a usage error or an identity refused (each said on stderr). */
export async function runCredsCommand(argv: readonly string[], io: CredsIo = stdio): Promise<number> {
  const [verb, ...rest] = argv;
  let values: Values;
  try {
    values = parseArgs({ args: [...rest], options: OPTIONS, allowPositionals: false }).values;
  } catch (err) {
    io.err(`${(err as Error).message}\nusage:\n${CREDS_USAGE}`);
    return 2;
  }
  if (!values.dir || !["init", "add", "revoke", "ls"].includes(verb ?? "")) {
    io.err(`usage:\n${CREDS_USAGE}`);
    return 2;
  }
  const dir = resolve(values.dir);
  if (verb === "ls") {
    for (const i of readIdentities(dir))
      io.out(`${i.role}\t${i.user ? `${i.name}:${i.user}${i.groups ? `:${i.groups.join(",")}` : ""}` : i.name}\t${i.public_key}\t${i.file}`);
    return 0;
  }
  const given = listed(values);
  if (typeof given === "string") {
    io.err(given);
    return 2;
  }
  const spec = verb === "init" ? given : merge(specOf(readIdentities(dir)), given, verb === "add");
  return report(writeCredentials(dir, spec), values["server-config"], io);
}
