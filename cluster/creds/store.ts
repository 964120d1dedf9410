/**
 * The credentials directory: one NKey seed file per identity (mode 0600; the `nats` CLI takes it
 * as `--nkey FILE`, a node as its connection's seed), the server's `auth.conf` (public keys only)
 * and `identities.json` (which public key is who, to name a caller the server vouched for).
 * Writing is idempotent: a seed already on disk is kept, a missing one is made, and a seed file
 * whose identity is no longer listed is deleted, so the next server reload refuses it.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { nkeyAuthenticator, nkeys, type Authenticator } from "@nats-io/transport-node";
import { renderAuthConfig, type AuthConfigOptions, type Identity, type Role } from "./config.js";
import { AUTH_CONFIG_FILE, IDENTITIES_FILE, planCredentials, SEED_SUFFIX, type CredsSpec, type PlannedCredential } from "./plan.js";

export interface CredentialFile extends Identity {
  /** Relative to the credentials directory. */
  file: string;
  /** The seed file's path (the directory joined with `file`). */
  path: string;
}

export type WriteCredsResult =
  | {
      outcome: "ok";
      dir: string;
      authConfig: string;
      credentials: CredentialFile[];
      /** Relative paths of the seeds made now. */
      created: string[];
      /** Relative paths of the seeds deleted because their identity is no longer listed. */
      revoked: string[];
    }
  | { outcome: "invalid"; problems: string[] };

export interface WriteCredsOptions extends AuthConfigOptions {
  /** A new user seed (`SU…`); default a fresh random one. */
  newSeed?: () => string;
}

/** An entry of `identities.json`. */
export interface StoredIdentity {
  role: Role;
  name: string;
  user?: string;
  /** A tenant user's reviewer groups. */
  groups?: readonly string[];
  public_key: string;
  file: string;
}

const ROLE_FOLDERS = ["tenants", "operators", "admins", "nodes"];

export function newUserSeed(): string {
  return new TextDecoder().decode(nkeys.createUser().getSeed());
}

/** The user public key (`U…`) of a seed; throws on anything that is not a user seed. */
export function publicKeyOf(seed: string): string {
  const kp = nkeys.fromSeed(new TextEncoder().encode(seed.trim()));
  const key = kp.getPublicKey();
  if (!key.startsWith("U")) throw new Error("not a user seed");
  return key;
}

/** A seed file's seed, for a connection's authenticator. */
export function readSeed(path: string): string {
  return readFileSync(path, "utf8").trim();
}

/** For `connect()` of `@nats-io/transport-node`: `{ servers, authenticator: seedAuthenticator(file) }`. */
export function seedAuthenticator(path: string): Authenticator {
  return nkeyAuthenticator(new TextEncoder().encode(readSeed(path)));
}

function writePrivate(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  // Written aside and renamed, so a reader never sees half a file and a crash leaves the old one.
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

export function writeCredentials(dir: string, spec: CredsSpec, options: WriteCredsOptions = {}): WriteCredsResult {
  const plan = planCredentials(spec);
  if (plan.outcome === "invalid") return plan;
  const newSeed = options.newSeed ?? newUserSeed;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const created: string[] = [];
  const credentials = plan.credentials.map((c: PlannedCredential): CredentialFile => {
    const path = join(dir, c.file);
    let seed: string;
    if (existsSync(path)) seed = readSeed(path);
    else {
      seed = newSeed();
      writePrivate(path, `${seed}\n`);
      created.push(c.file);
    }
    return {
      role: c.role,
      name: c.name,
      ...(c.user ? { user: c.user } : {}),
      ...(c.groups ? { groups: c.groups } : {}),
      publicKey: publicKeyOf(seed),
      file: c.file,
      path,
    };
  });
  const listed = new Set(plan.credentials.map((c) => c.file));
  const revoked: string[] = [];
  for (const folder of ROLE_FOLDERS) {
    if (!existsSync(join(dir, folder))) continue;
    for (const f of readdirSync(join(dir, folder))) {
      const file = `${folder}/${f}`;
      if (f.endsWith(SEED_SUFFIX) && !listed.has(file)) {
        rmSync(join(dir, file));
        revoked.push(file);
      }
    }
  }
  const authConfig = join(dir, AUTH_CONFIG_FILE);
  writePrivate(authConfig, renderAuthConfig(credentials, options));
  const identities: StoredIdentity[] = credentials.map(({ role, name, user, groups, publicKey, file }) => ({
    role,
    name,
    ...(user ? { user } : {}),
    ...(groups ? { groups } : {}),
    public_key: publicKey,
    file,
  }));
  writePrivate(join(dir, IDENTITIES_FILE), JSON.stringify({ identities }, null, 2) + "\n");
  return { outcome: "ok", dir, authConfig, credentials, created, revoked };
}

/** The identities a directory holds now (none when it has no `identities.json`). */
export function readIdentities(dir: string): StoredIdentity[] {
  const path = join(dir, IDENTITIES_FILE);
  if (!existsSync(path)) return [];
  return (JSON.parse(readFileSync(path, "utf8")) as { identities: StoredIdentity[] }).identities;
}

/** The spec that lists exactly the identities a directory holds (an operator's system key comes with it). */
export function specOf(identities: readonly StoredIdentity[]): Required<CredsSpec> {
  const names = (role: Role) => identities.filter((i) => i.role === role && !i.user).map((i) => i.name);
  return {
    tenants: names("tenant"),
    users: identities.filter((i) => i.role === "tenant" && i.user).map((i) => ({ tenant: i.name, name: i.user!, ...(i.groups ? { groups: i.groups } : {}) })),
    operators: names("operator"),
    admins: names("admin"),
    nodes: names("node"),
  };
}
