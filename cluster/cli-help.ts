/**
 * The usage of every `runway` command, in one place: `runway --help` (the overview),
 * `runway <command> --help` and `runway help <command>` print from it, and docs/cli.md shows the
 * same text (test/integration/cli-usage.test.ts compares them). None of it needs a server.
 */

/** One form of a command: its syntax and what it does. */
type Form = readonly [syntax: string, does?: string];

export interface CommandHelp {
  readonly name: string;
  readonly summary: string;
  readonly forms: readonly Form[];
  readonly options: readonly (readonly [flag: string, means: string])[];
  readonly example: readonly string[];
  /** It talks to a Runway node through NATS (the connection options apply). */
  readonly connects: "api" | "nats" | "none";
}

const CONNECTION = "--servers URL,… (env RUNWAY_SERVERS, default nats://127.0.0.1:4222)  --user U --pass P  --nkey FILE (env RUNWAY_NKEY)";
const TENANT = "--tenant T (env RUNWAY_TENANT, default demo)";
export const EXIT_CODES =
  "exit codes: 0 success · 1 the API refused, did not find, or a run failed · 2 usage (bad flag, argument or file) · 3 no answer (NATS unreachable, credentials refused, no node, timeout)";

export const COMMANDS: readonly CommandHelp[] = [
  {
    name: "dev",
    summary: "Runs NATS (an embedded nats-server, credentials on), one node and a tenant on this machine: a place to try Runway.",
    forms: [["dev [--handlers a.ts,b.ts] [--tenant demo] [--store DIR] [--http-port 8080] [--otlp-endpoint URL]", "embedded nats-server + one node"]],
    options: [
      ["--handlers FILES", "comma-separated modules of code handlers (default: the demo handlers)"],
      ["--tenant ID", "the tenant it creates (default demo)"],
      ["--store DIR", "where NATS keeps its data and the credentials (default: a new temporary directory)"],
      ["--http-port P", "the HTTP port on 127.0.0.1 of the A2A agents and the web console (default 8080; 0: any free port)"],
    ],
    example: ["runway dev", "export RUNWAY_SERVERS=nats://127.0.0.1:4222 NATS_URL=… NATS_NKEY=… RUNWAY_NKEY=…   # as it prints, in another shell"],
    connects: "none",
  },
  {
    name: "node",
    summary: "Runs one node of a cluster against a NATS server; it drains and exits 0 on SIGTERM or SIGINT.",
    forms: [
      [
        "node --name N [--servers URL,…] [--handlers a.ts,…] [--threads 2] [--replicas 1] [--lease-ttl-ms 10000] [--metrics-port P] [--http-port P] [--http-host H] [--ended-run-retention-ms 604800000] [--a2a-credentials FILE] [--credentials-dir DIR] [--otlp-endpoint URL]",
      ],
    ],
    options: [
      ["--name N", "the node's name, unique in the cluster (required)"],
      ["--handlers FILES", "comma-separated modules of code handlers (default: the demo handlers)"],
      ["--threads N", "worker threads for code steps (default 2)"],
      ["--replicas N", "JetStream replicas of the streams and buckets it creates (default 1)"],
      ["--lease-ttl-ms MS", "how long a partition's lease lives without renewal (default 10000)"],
      ["--metrics-port P", "serve Prometheus metrics on this port"],
      ["--http-port P / --http-host H", "serve the A2A agents and the web console over HTTP on this port (host default 127.0.0.1)"],
      ["--ended-run-retention-ms MS", "how long an ended run's record is kept whole (at least 1000; default 604800000)"],
      ["--a2a-credentials FILE", 'bearer tokens of the remote A2A agents `a2a` nodes call: {"<tenant>/<auth>": "<token>"} (env RUNWAY_A2A_CREDENTIALS)'],
      ["--credentials-dir DIR", "the `runway creds` directory: requests are answered as the tenant key that sent them (env RUNWAY_CREDENTIALS_DIR)"],
      [
        "--otlp-endpoint URL",
        "export trace spans over OTLP/HTTP to URL/v1/traces (env OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; off by default; docs/traces.md)",
      ],
    ],
    example: ["runway node --name n1 --servers nats://10.0.0.5:4222 --handlers ./handlers.ts"],
    connects: "nats",
  },
  {
    name: "tenant",
    summary: "Creates a tenant, reads or changes its settings, and stops or resumes its admissions.",
    forms: [
      ["tenant create <id> [--settings JSON]", "a new tenant (`exists` if it is there already)"],
      ["tenant get <id>", "its settings and state"],
      ["tenant put <id> --settings JSON", "changes its settings"],
      ["tenant kill|drain|resume <id> [--reason R]", "stops new runs (kill, drain) or lets them in again"],
    ],
    options: [
      ["--settings JSON", 'a JSON object of settings, e.g. {"max_concurrency":20}'],
      ["--reason R", "why, kept with the state change"],
    ],
    example: [`runway tenant create acme --settings '{"max_concurrency":20}'`],
    connects: "api",
  },
  {
    name: "def",
    summary: "Publishes, reads, disables and enables the tenant's workflow definitions.",
    forms: [
      ["def put <file.json> [--draft]", "publishes the definition in the file (--draft: saves it unpublished)"],
      ["def get <name> [--version N]", "a definition: its latest published version, or version N"],
      ["def list", "the tenant's definitions"],
      ["def disable <name>", "refuses new starts of the definition; its runs, and the children they start, go on"],
      ["def enable <name>", "lets the definition start again"],
    ],
    options: [
      ["--draft", "save without publishing"],
      ["--version N", "the version to read"],
    ],
    example: ["runway def put flow.json"],
    connects: "api",
  },
  {
    name: "run",
    summary: "Starts runs, reads and follows them, and steers them (cancel, signal, reconcile, replay).",
    forms: [
      [
        "run start <definition> [--input JSON] [--key SOURCE:DELIVERY] [--lane interactive|batch|migration] [--source cli] [--project P] [--priority 0-9]",
        "starts a run (a start key makes a retried start answer `duplicate`)",
      ],
      ["run get <id>", "the run as it is now"],
      ["run list [--status S] [--limit N] [--cursor C]", "a page of the tenant's runs"],
      ["run events <id> [--after ID] [--limit N]", "a page of its stored progress events"],
      ["run watch <id>", "its progress events from its start until it ends"],
      ["run cancel <id> [--reason TEXT]"],
      ["run signal <id> <name> [--data JSON]", "a signal for the run's wait nodes; exit 1 unless delivered"],
      ["run held [<id>]", "steps held for reconciliation (of one run), oldest first"],
      ["run trajectory <id>", "its steps, tool calls and outcome as JSON lines"],
      ["run replay <id> [--wait-ms 30000]", "re-executes it with every tool call answered from its receipts; exit 1 unless identical"],
      ["run reconcile <id> --key K --decision done|retry|abandon [--result JSON] [--by NAME]", "settles a step held on an intent whose outcome is unknown"],
    ],
    options: [
      ["--input JSON", "the run's input (default {})"],
      ["--key SOURCE:DELIVERY", "a start key: the same key starts one run"],
      ["--lane L", "interactive, batch or migration"],
      ["--source S", "who asks (default cli): decides the default lane"],
      ["--project P", "the project the run counts against"],
      ["--priority 0-9", "its priority within its lane"],
      ["--status S", "list only runs in this status"],
      ["--limit N / --cursor C", "page size / the next_cursor of the page before"],
      ["--after ID", "events after this event id"],
      ["--reason TEXT", "why it is cancelled"],
      ["--data JSON", "what the signal carries"],
      ["--wait-ms MS", "how long a replay may take (default 30000)"],
      ["--key K --decision D", "the held intent and how to settle it"],
      ["--result JSON", "the call's result, for --decision done"],
      ["--by NAME", "who settles it (default cli)"],
    ],
    example: [`runway run start hello --input '{"name":"Ada"}' --key cli:1`, "runway run watch <the id it printed>"],
    connects: "api",
  },
  {
    name: "approvals",
    summary: "The reviewers' inbox: approval nodes, gated tool calls, tool servers' requests for input, runs waiting to be admitted.",
    forms: [
      ["approvals ls [--group G] [--run ID] [--limit N] [--cursor C]", "pending items, soonest deadline first, a page at a time"],
      ["approvals show <id>", "one item: its kind (node, tool, input, admission), prompt and payload"],
      ["approvals approve <id> [--payload JSON]", "approves; a request for input is answered with its form's content"],
      ["approvals reject <id> [--reason R]", "rejects (a request for input: declines it)"],
      ["approvals edit <id> --payload JSON", "approves with a changed payload (a gated call: its arguments)"],
    ],
    options: [
      ["--payload JSON", "approve: the content of an input item's form (several forms: an object by key); edit: the new payload"],
      ["--payload-file FILE", "the same, read from a file"],
      ["--reason R", "why it is rejected"],
      ["--by NAME", "who decides (default $USER)"],
      ["--group G / --run ID", "list only one reviewer group's items / one run's"],
      ["--limit N / --cursor C", "page size / the next_cursor of the page before"],
    ],
    example: ["runway approvals ls --group finance", `runway approvals approve t1_0a1b:pay:input.bank/confirm_charge.1 --payload '{"ok":true}'`],
    connects: "api",
  },
  {
    name: "tools",
    summary: "The tenant's MCP tool servers and their tools, and a one-step run to try a tool.",
    forms: [
      ["tools servers put <file.json>", "registers or changes a server (the file: its name, transport, overrides…)"],
      ["tools servers get <name> | tools servers ls | tools servers rm <name>"],
      ["tools ls [--server S]", "every tool with its effective class"],
      ["tools call <server> <tool> [--args JSON] [--timeout-ms N]", "a one-step tool run through the gateway; prints its result"],
    ],
    options: [
      ["--server S", "list only this server's tools"],
      ["--args JSON", "the call's arguments, a JSON object (default {})"],
      ["--timeout-ms N", "how long to wait for the call's run (default 120000)"],
    ],
    example: [`runway tools call fx get_value --args '{"key":"x"}'`],
    connects: "api",
  },
  {
    name: "models",
    summary: "The tenant's model providers (OpenAI-compatible, Anthropic, scripted); no answer shows a key.",
    forms: [
      ["models put <file.json> [--api-key-env VAR]", "creates or replaces a provider (the file: its name, kind, base_url, models…)"],
      ["models list | models get <name> | models delete <name>"],
    ],
    options: [["--api-key-env VAR", "put: the provider's key, read from this variable of the CLI's environment (not from a file or the command line)"]],
    example: ["runway models put openai.json --api-key-env OPENAI_API_KEY"],
    connects: "api",
  },
  {
    name: "agents",
    summary: "Which of the tenant's published definitions are A2A agents, served by nodes with an HTTP port at /a2a/<tenant>/<agent>.",
    forms: [
      ["agents expose <definition> [--name N] [--description D] [--skills-file F] [--public]", "exposes it (again: changes it)"],
      ["agents ls", "the exposed agents"],
      ["agents hide <name>", "stops serving it (its tasks' runs go on)"],
    ],
    options: [
      ["--name N", "the agent's name in its URL (default: the definition's)"],
      ["--description D", "its card's description (default: the definition's)"],
      ["--skills-file F", "a JSON array of its card's skills (default: one, from the definition)"],
      ["--public", "callers need no credentials (default: a bearer token is required)"],
    ],
    example: ["runway agents expose hello --public", "curl http://127.0.0.1:8080/a2a/demo/hello/.well-known/agent-card.json"],
    connects: "api",
  },
  {
    name: "keys",
    summary: "The tenant's API keys: bearer tokens of its HTTP callers (A2A agents that are not public), stored hashed.",
    forms: [
      ["keys create <name> [--group G]... [--interactive]", "a new key; its token is printed this once (identity key:<tenant>/<name>)"],
      ["keys ls", "the keys: id, name, groups, created_at, revoked, the token's last 4 characters"],
      ["keys revoke <name>", "refuses its token from now on, on every node"],
    ],
    options: [
      ["--group G", "create: a reviewer group whose approvals its callers may decide (repeatable)"],
      ["--interactive", "create: its callers' runs take the interactive lane (default: batch)"],
    ],
    example: ["runway keys create partner --group finance", "curl -H 'Authorization: Bearer rwk.demo.partner.…' http://127.0.0.1:8080/a2a/demo/hello/tasks"],
    connects: "api",
  },
  {
    name: "schedules",
    summary: "The tenant's schedules: cron expressions (in a time zone) or fixed intervals that start a definition with an input.",
    forms: [
      [
        "schedules put <name> --definition D (--cron EXPR [--tz TZ] | --every-ms MS) [--input JSON] [--catch-up N] [--lane L] [--project P] [--paused]",
        "creates or replaces a schedule",
      ],
      ["schedules get <name> | schedules ls | schedules rm <name>"],
      ["schedules pause <name> | schedules resume <name>", "stops its firings / starts them again from now"],
    ],
    options: [
      ["--definition D", "the definition each firing starts (its latest published version)"],
      ["--cron EXPR", 'a cron expression: 5 fields, or 6 with seconds first ("0 9 * * 1-5")'],
      ["--tz TZ", "the cron's IANA time zone (default UTC)"],
      ["--every-ms MS", "a fixed interval instead (at least 1000)"],
      ["--input JSON", "the input of every run it starts (default {})"],
      ["--catch-up N", "after downtime, start the N newest missed firings too (default: skip them)"],
      ["--lane L / --project P", "the lane and project of its runs"],
      ["--paused", "create it paused"],
    ],
    example: [`runway schedules put nightly --definition report --cron "0 2 * * *" --tz Europe/Paris --catch-up 1`, "runway schedules pause nightly"],
    connects: "api",
  },
  {
    name: "ops",
    summary: "Operators' reads.",
    forms: [["ops dead-letters [--limit N]", "the newest dead letters first (default 50, at most 500)"]],
    options: [["--limit N", "how many"]],
    example: ["runway ops dead-letters --limit 10"],
    connects: "api",
  },
  {
    name: "creds",
    summary:
      "Writes NATS credentials and the server's authorization config: an account per tenant, operators and nodes with their own keys (docs/security.md).",
    forms: [
      [
        "creds init --dir DIR [--tenant T]… [--user T:NAME[:GROUP,…]]… [--operator NAME]… [--admin NAME]… [--node NAME]… [--server-config FILE]",
        "exactly these identities: seeds made or kept, any other revoked",
      ],
      ["creds add|revoke --dir DIR [same identity flags]", "adds or revokes the identities named"],
      ["creds ls --dir DIR", "who holds a key: role, name, public key, seed file"],
    ],
    options: [
      ["--dir DIR", "where the seeds, identities.json and the auth config live"],
      [
        "--tenant T / --user T:NAME[:GROUP,…]",
        "a tenant's account (and its first key) / another key of tenant T, with the reviewer groups whose approvals it may decide",
      ],
      ["--operator NAME / --admin NAME / --node NAME", "an operator (API, ops, reads), an admin (repairs), a node (the service)"],
      ["--server-config FILE", "also write the include line into this nats-server config; reload the server after (twice after adding a tenant)"],
    ],
    example: ["runway creds init --dir ./creds --tenant acme --operator ops --node n1", "runway creds revoke --dir ./creds --user acme:ci"],
    connects: "none",
  },
  {
    name: "machines",
    summary: "Prints the production state machines (run, tenant) as diagrams, read off the machines themselves.",
    forms: [["machines", "the production state machines as diagrams; needs no server"]],
    options: [],
    example: ["runway machines > machines.md"],
    connects: "none",
  },
  {
    name: "help",
    summary: "Prints the overview, or one command's usage.",
    forms: [["help [<command>]", "this overview, or one command's usage (also: runway <command> --help)"]],
    options: [],
    example: ["runway help run"],
    connects: "none",
  },
];

const COLUMN = 62;

function formLine([syntax, does]: Form): string {
  if (!does) return `  ${syntax}`;
  return syntax.length < COLUMN ? `  ${syntax.padEnd(COLUMN)}${does}` : `  ${syntax}\n  ${" ".repeat(COLUMN)}${does}`;
}

export function commandHelp(name: string): CommandHelp | undefined {
  return COMMANDS.find((c) => c.name === name);
}

/** `runway <name> --help`: the command's forms, its options, the connection's, one example and the exit codes. */
export function commandUsage(name: string): string {
  const help = commandHelp(name);
  if (!help) throw new Error(`no usage for ${name}`);
  const width = Math.max(0, ...help.options.map(([flag]) => flag.length)) + 2;
  return [
    `usage: runway ${help.name}${help.forms.length > 1 ? " <…>" : ""} [options]`,
    help.summary,
    "",
    ...help.forms.map(formLine),
    ...(help.options.length ? ["", "options:", ...help.options.map(([flag, means]) => `  ${flag.padEnd(width)}${means}`)] : []),
    ...(help.connects === "none" ? [] : ["", `connection: ${CONNECTION}${help.connects === "api" ? `  ${TENANT}` : ""}`]),
    "",
    "example:",
    ...help.example.map((line) => `  ${line}`),
    "",
    EXIT_CODES,
  ].join("\n");
}

/** `runway --help`: every command's forms, the connection's options and the exit codes. */
export function overview(): string {
  return [
    "usage: runway <command> [options]",
    ...COMMANDS.flatMap((c) => c.forms.map(formLine)),
    `common: ${CONNECTION}  ${TENANT}`,
    "node and dev drain on SIGTERM or SIGINT, and when the npm that started them is gone",
    "runway <command> --help (or runway help <command>): that command's options and an example",
    EXIT_CODES,
  ].join("\n");
}
