import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { headers } from "@nats-io/transport-node";
import { callerOf, REQUEST_INFO_HEADER } from "../../gateways/api/callers.js";
import {
  callerDirectory,
  devCredentials,
  planCredentials,
  publicKeyOf,
  readIdentities,
  renderAuthConfig,
  runCredsCommand,
  writeCredentials,
  type Identity,
} from "../../cluster/creds/index.js";

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), "runway-creds-unit-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const quiet = () => {
  const lines: string[] = [];
  return { lines, io: { out: (l: string) => lines.push(l), err: (l: string) => lines.push(`ERR ${l}`) } };
};

describe("planCredentials", () => {
  it("one seed file per identity; an operator also gets a system-account key", () => {
    const plan = planCredentials({ tenants: ["acme"], users: [{ tenant: "acme", name: "alice" }], operators: ["ops1"], admins: ["root"], nodes: ["node-a"] });
    expect(plan).toEqual({
      outcome: "ok",
      credentials: [
        { role: "tenant", name: "acme", file: "tenants/acme.nk" },
        { role: "tenant", name: "acme", user: "alice", file: "tenants/acme.alice.nk" },
        { role: "operator", name: "ops1", file: "operators/ops1.nk" },
        { role: "system", name: "ops1", file: "operators/ops1.sys.nk" },
        { role: "admin", name: "root", file: "admins/root.nk" },
        { role: "node", name: "node-a", file: "nodes/node-a.nk" },
      ],
    });
  });

  it("refuses the reserved tenant `ops`, subject-unsafe ids and names, unknown tenants of users, duplicates", () => {
    const plan = planCredentials({
      tenants: ["ops", "a.b", "ok", "ok"],
      users: [
        { tenant: "nobody", name: "x" },
        { tenant: "ok", name: "../x" },
      ],
      nodes: ["n>"],
    });
    expect(plan.outcome).toBe("invalid");
    const problems = plan.outcome === "invalid" ? plan.problems.join("\n") : "";
    for (const bad of ['tenant "ops"', 'tenant "a.b"', "tenant ok is listed twice", 'tenant "nobody" is not listed', "user ok:../x", 'node "n>"'])
      expect(problems).toContain(bad);
  });
});

describe("renderAuthConfig", () => {
  const ids: Identity[] = [
    { role: "node", name: "n1", publicKey: "UNODE" },
    { role: "operator", name: "o", publicKey: "UOPER" },
    { role: "system", name: "o", publicKey: "USYS" },
    { role: "tenant", name: "b", publicKey: "UTB" },
    { role: "tenant", name: "a", publicKey: "UTA" },
  ];

  it("each tenant's account imports only its own API and events; the text does not depend on the order given", () => {
    const text = renderAuthConfig(ids);
    expect(text).toBe(renderAuthConfig([...ids].reverse()));
    expect(text).toContain('{ service: "runway.v1.a.>", accounts: ["TENANT_a"] }');
    expect(text).toContain('{ stream: "rw.evt.a.>", accounts: ["TENANT_a"] }');
    expect(text).toContain('{ service: { account: "RUNWAY", subject: "runway.v1.a.>" }, share: true }');
    expect(text).toContain('{ nkey: "UTA", permissions: { publish: { allow: ["runway.v1.a.>"] }, subscribe: { allow: ["_INBOX.>", "rw.evt.a.>"] } } }');
    expect(text).toContain('{ nkey: "UNODE" }');
    expect(text).toContain('"SYS" {\n    users: [\n      { nkey: "USYS" }');
    expect(text).toContain('system_account: "SYS"');
    // JetStream only in Runway's account.
    expect(text.match(/jetstream: enabled/g)).toHaveLength(1);
  });
});

describe("writeCredentials and runway creds", () => {
  it("keeps seeds already on disk, makes missing ones private, and revokes what is no longer listed", () => {
    const dir = tmp();
    const first = writeCredentials(dir, { tenants: ["a", "b"], nodes: ["n1"] });
    if (first.outcome !== "ok") throw new Error("invalid");
    expect(first.created.sort()).toEqual(["nodes/n1.nk", "tenants/a.nk", "tenants/b.nk"]);
    expect(statSync(join(dir, "tenants/a.nk")).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, "tenants/a.nk"), "utf8")).toMatch(/^SU[A-Z2-7]+\n$/);
    const seedA = readFileSync(join(dir, "tenants/a.nk"), "utf8");
    const second = writeCredentials(dir, { tenants: ["a"], nodes: ["n1"] });
    if (second.outcome !== "ok") throw new Error("invalid");
    expect(second.created).toEqual([]);
    expect(second.revoked).toEqual(["tenants/b.nk"]);
    expect(readFileSync(join(dir, "tenants/a.nk"), "utf8")).toBe(seedA);
    expect(existsSync(join(dir, "tenants/b.nk"))).toBe(false);
    const conf = readFileSync(second.authConfig, "utf8");
    expect(conf).not.toContain("TENANT_b");
    expect(conf).toContain(second.credentials.find((c) => c.name === "a")!.publicKey);
    // No secret in the server's config: only public keys (a seed is SU and 56 characters, a token of its own; a public key may hold "SU" inside).
    expect(conf).not.toMatch(/\bSU[A-Z2-7]{56}\b/);
  });

  it("init, add, revoke and ls change the list the directory holds", async () => {
    const dir = tmp();
    const run = async (...argv: string[]) => {
      const q = quiet();
      return { code: await runCredsCommand(argv, q.io), lines: q.lines };
    };
    const init = await run("init", "--dir", dir, "--tenant", "a", "--operator", "o1", "--node", "n1", "--server-config", join(dir, "nats.conf"));
    expect(init.code).toBe(0);
    // nats-server resolves includes against the config's own directory.
    expect(init.lines.join("\n")).toContain('add `include "auth.conf"`');
    expect((await run("add", "--dir", dir, "--tenant", "b", "--user", "b:alice")).code).toBe(0);
    expect(readIdentities(dir).map((i) => `${i.role}:${i.name}${i.user ? `:${i.user}` : ""}`)).toEqual([
      "tenant:a",
      "tenant:b",
      "tenant:b:alice",
      "operator:o1",
      "system:o1",
      "node:n1",
    ]);
    const revoked = await run("revoke", "--dir", dir, "--tenant", "b");
    expect(revoked.lines).toContain("revoked tenants/b.nk");
    expect(revoked.lines).toContain("revoked tenants/b.alice.nk");
    const ls = await run("ls", "--dir", dir);
    expect(ls.lines.map((l) => l.split("\t")[0])).toEqual(["tenant", "operator", "system", "node"]);
    const bad = await run("add", "--dir", dir, "--tenant", "ops");
    expect(bad.code).toBe(2);
    expect(bad.lines.join("\n")).toContain('tenant "ops"');
    expect((await run("frobnicate", "--dir", dir)).code).toBe(2);
  });
});

describe("tenant users' reviewer groups, and who a request is from", () => {
  it("--user T:NAME:GROUP,GROUP stores the groups; added again, the user takes its new groups; a bad group is refused", async () => {
    const dir = tmp();
    const run = async (...argv: string[]) => {
      const q = quiet();
      return { code: await runCredsCommand(argv, q.io), lines: q.lines };
    };
    expect((await run("init", "--dir", dir, "--tenant", "a", "--user", "a:alice:ops,finance", "--user", "a:bob")).code).toBe(0);
    const user = (name: string) => readIdentities(dir).find((i) => i.user === name);
    expect(user("alice")?.groups).toEqual(["finance", "ops"]);
    expect(user("bob")?.groups).toBeUndefined();
    expect((await run("add", "--dir", dir, "--user", "a:bob:ops")).code).toBe(0);
    expect(user("bob")?.groups).toEqual(["ops"]);
    expect((await run("ls", "--dir", dir)).lines.some((l) => l.includes("a:bob:ops\t"))).toBe(true);
    const bad = await run("add", "--dir", dir, "--user", "a:carol:o.ps");
    expect(bad.code).toBe(2);
    expect(bad.lines.join("\n")).toContain("a group is 1-64 characters");
    expect((await run("add", "--dir", dir, "--user", "a:carol:ops:x")).code).toBe(2);
  });

  it("callerOf: a tenant key through its import is that key, with its groups; no directory or no header is staff; another account's key is foreign", () => {
    const dir = tmp();
    const written = writeCredentials(dir, { tenants: ["a", "b"], users: [{ tenant: "a", name: "alice", groups: ["ops"] }] });
    if (written.outcome !== "ok") throw new Error("invalid");
    const key = (tenant: string, user?: string) => written.credentials.find((c) => c.name === tenant && c.user === user)!.publicKey;
    const directory = callerDirectory(dir, () => 0);
    const info = (acc: string, user: string) => {
      const h = headers();
      h.set(REQUEST_INFO_HEADER, JSON.stringify({ acc, user }));
      return h;
    };
    expect(callerOf(directory, "a", info("TENANT_a", key("a", "alice")))).toEqual({
      from: "tenant",
      caller: { identity: "nats:a/alice", groups: ["ops"], interactive: false },
    });
    expect(callerOf(directory, "a", info("TENANT_a", key("a")))).toMatchObject({ from: "tenant", caller: { identity: "nats:a/a", groups: [] } });
    expect(callerOf(directory, "a", info("TENANT_b", key("b")))).toEqual({ from: "foreign", account: "TENANT_b" });
    expect(callerOf(directory, "a", info("RUNWAY", "Uxyz"))).toEqual({ from: "staff" });
    expect(callerOf(directory, "a", undefined)).toEqual({ from: "staff" });
    expect(callerOf(undefined, "a", info("TENANT_a", key("a", "alice")))).toEqual({ from: "staff" });
    const garbled = headers();
    garbled.set(REQUEST_INFO_HEADER, "{not json");
    expect(callerOf(directory, "a", garbled)).toEqual({ from: "staff" });
  });
});

describe("devCredentials", () => {
  it("the dev tenant, operator and node in the store; the include is relative to the server config's directory; the same keys on a restart", () => {
    const store = tmp();
    const dev = devCredentials(store, store, "demo");
    expect(dev.include).toBe('include "creds/auth.conf"');
    expect(dev.tenantKey).toBe(join(store, "creds/tenants/demo.nk"));
    expect(dev.operatorKey).toBe(join(store, "creds/operators/dev.nk"));
    expect(dev.env).toEqual({ NATS_NKEY: dev.tenantKey, RUNWAY_NKEY: dev.tenantKey });
    const conf = readFileSync(join(store, "creds/auth.conf"), "utf8");
    expect(conf).toContain(publicKeyOf(dev.nodeSeed));
    expect(conf).toContain('"TENANT_demo"');
    expect(devCredentials(store, store, "demo").nodeSeed).toBe(dev.nodeSeed);
    expect(() => devCredentials(store, store, "ops")).toThrow(/ops/);
  });
});
