/**
 * The one-way layering of docs/ARCHITECTURE.md §5, enforced: machines/ and runtime/ import no project
 * folder; actors/ binds the two; gateways/ sit on top of those; cluster/ may use everything.
 * Folders are entered only through their index.ts, and so are the rooms inside actors/; no import
 * cycles anywhere.
 */
const folders = ["machines", "runtime", "actors", "gateways", "cluster"];
const allowed = {
  machines: [],
  runtime: [],
  actors: ["machines", "runtime"],
  gateways: ["machines", "runtime", "actors"],
  cluster: ["machines", "runtime", "actors", "gateways"],
};

const layerRules = folders.map((from) => ({
  name: `layering-${from}`,
  comment: `${from}/ may import only: ${allowed[from].join(", ") || "no project folder"}`,
  severity: "error",
  from: { path: `^${from}/` },
  to: { path: `^(${folders.filter((f) => f !== from && !allowed[from].includes(f)).join("|")}|test)/` },
}));

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "Import cycles make start-up order and reasoning fragile.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    {
      name: "public-surface-only",
      comment: "Another folder is entered only through its index.ts.",
      severity: "error",
      from: { path: "^(machines|runtime|actors|gateways|cluster)/" },
      to: {
        path: "^(machines|runtime|actors|gateways|cluster)/.+",
        // runtime/pool/handler-api.ts is the handler SDK: handler modules load it inside worker
        // threads, where the whole runtime surface (NATS, Piscina) would be dead weight.
        pathNot: ["^(machines|runtime|actors|gateways|cluster)/index\\.ts$", "^$1/", "^runtime/pool/handler-api\\.ts$"],
      },
    },
    {
      name: "rooms-through-index",
      comment: "A room of actors/ (run/, tenant/, engine/, definitions/, records/) enters another only through that room's index.ts.",
      severity: "error",
      from: { path: "^actors/([^/]+)/" },
      to: { path: "^actors/[^/]+/", pathNot: ["^actors/$1/", "^actors/[^/]+/index\\.ts$"] },
    },
    {
      name: "rooms-below-the-hall",
      comment: "actors/index.ts and topology.ts sit above the rooms: a room imports neither (that would make a cycle through the index).",
      severity: "error",
      from: { path: "^actors/[^/]+/" },
      to: { path: "^actors/[^/]+\\.ts$" },
    },
    {
      name: "mcp-sdk-on-first-use",
      comment:
        "The MCP SDK costs ~110 ms of every process start: only gateways/tools/sdk.ts imports it, when a tool is first used (type imports are free). The demo's MCP server is a process of its own.",
      severity: "error",
      from: { pathNot: "^(gateways/tools/sdk\\.ts|cluster/demo/shop-server\\.mjs)$" },
      to: { path: "node_modules/@modelcontextprotocol/sdk/", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "model-sdks-on-first-use",
      comment:
        "The provider SDKs cost ~250 ms of a process start and hold wire formats: only gateways/models/sdk.ts imports them, when a model is first called (type imports are free, and only in gateways/models/).",
      severity: "error",
      from: { pathNot: "^gateways/models/sdk\\.ts$" },
      to: { path: "node_modules/(openai|@anthropic-ai/sdk)/", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "otel-sdk-on-first-use",
      comment:
        "The OpenTelemetry SDK is loaded only by a node with tracing on: only gateways/telemetry/sdk.ts imports it, when the exporter starts (type imports are free, and only in gateways/telemetry/).",
      severity: "error",
      from: { pathNot: "^gateways/telemetry/sdk\\.ts$" },
      to: { path: "node_modules/@opentelemetry/", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "otel-sdk-types-in-telemetry",
      comment: "OpenTelemetry's types stay in gateways/telemetry/: the rest speaks SpanRecord (actors/run/spans.ts).",
      severity: "error",
      from: { path: "^(machines|runtime|actors|cluster)/" },
      to: { path: "node_modules/@opentelemetry/" },
    },
    {
      name: "model-sdk-types-in-the-gateway",
      comment: "Provider wire types stay in gateways/models/: everything else speaks its normalized shapes.",
      severity: "error",
      from: { path: "^(machines|runtime|actors|cluster)/" },
      to: { path: "node_modules/(openai|@anthropic-ai/sdk)/" },
    },
    {
      name: "machines-are-pure",
      comment: "machines/ decides; it does no I/O and imports only zod and xstate.",
      severity: "error",
      from: { path: "^machines/" },
      to: { dependencyTypes: ["npm", "core"], pathNot: ["node_modules/(zod|xstate)/"] },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"] },
  },
};
