// The soak's workflows: each kind of work the issue names, built from one recording handler
// (`work`, cluster/demo/handlers.ts), sleeps, waits, approvals, children and tool calls.

const work = (id: string, needs: string[] = [], ms = 30) => ({ id, kind: "code", handler: "work", input: { ms }, ...(needs.length ? { needs } : {}) });

/** The kinds the driver starts, and what it must do for each. */
export const KINDS = ["seq", "wide", "parent", "sleeper", "waiter", "approver", "tools", "cancel_tree"] as const;
export type Kind = (typeof KINDS)[number];

/** Relative weights of the kinds in the mix. */
export const WEIGHTS: Record<Kind, number> = { seq: 4, wide: 2, parent: 2, sleeper: 1, waiter: 1, approver: 1, tools: 2, cancel_tree: 1 };

export const definitions: Record<string, unknown>[] = [
  { name: "soak-child", nodes: [work("c1"), work("c2", ["c1"])] },
  { name: "soak-slow-child", nodes: [work("s1", [], 800), work("s2", ["s1"], 800), work("s3", ["s2"], 800), work("s4", ["s3"], 800)] },
  // sequential: five steps one after the other
  { name: "soak-seq", nodes: [work("a"), work("b", ["a"]), work("c", ["b"]), work("d", ["c"]), work("e", ["d"])] },
  // wide: a map of twelve items, four at a time
  {
    name: "soak-wide",
    input_schema: { type: "object", required: ["items"], properties: { items: { type: "array" } } },
    nodes: [
      work("head"),
      { id: "fan", kind: "map", needs: ["head"], items: "${input.items}", handler: "work", input: { ms: 40 }, max_fanout: 50, concurrency: 4 },
      work("tail", ["fan"]),
    ],
  },
  // children: two child runs one after the other
  {
    name: "soak-parent",
    nodes: [
      work("p1"),
      { id: "kid1", kind: "subworkflow", needs: ["p1"], workflow: "soak-child" },
      { id: "kid2", kind: "subworkflow", needs: ["kid1"], workflow: "soak-child" },
      work("p2", ["kid2"]),
    ],
  },
  { name: "soak-sleeper", nodes: [work("before"), { id: "nap", kind: "sleep", needs: ["before"], duration_ms: 1500 }, work("after", ["nap"])] },
  { name: "soak-waiter", nodes: [work("before"), { id: "go", kind: "wait", needs: ["before"], signal: "go", timeout_ms: 600_000 }, work("after", ["go"])] },
  {
    name: "soak-approver",
    nodes: [work("before"), { id: "ok", kind: "approval", needs: ["before"], prompt: "Go ahead?", timeout_ms: 600_000 }, work("after", ["ok"])],
  },
  {
    name: "soak-tools",
    input_schema: { type: "object", required: ["account"], properties: { account: { type: "string" } } },
    nodes: [
      { id: "put", kind: "tool", server: "fx", tool: "set_value", arguments: { key: "${input.account}", value: "v", delay_ms: 300 } },
      { id: "charge", kind: "tool", needs: ["put"], server: "fx", tool: "charge", arguments: { account: "${input.account}", amount: 5, delay_ms: 300 } },
      work("after", ["charge"]),
    ],
  },
  // a whole tree the driver cancels: slow children, a slow map
  {
    name: "soak-cancel-tree",
    nodes: [
      work("root"),
      {
        id: "both",
        kind: "parallel",
        needs: ["root"],
        branches: [
          [{ id: "kid", kind: "subworkflow", workflow: "soak-slow-child" }],
          [{ id: "kid_b", kind: "subworkflow", workflow: "soak-slow-child" }],
          [{ id: "slow_map", kind: "map", items: "${input.items}", handler: "work", input: { ms: 800 }, max_fanout: 10, concurrency: 2 }],
        ],
      },
      work("never", ["both"]),
    ],
  },
];

export const definitionOf: Record<Kind, string> = {
  seq: "soak-seq",
  wide: "soak-wide",
  parent: "soak-parent",
  sleeper: "soak-sleeper",
  waiter: "soak-waiter",
  approver: "soak-approver",
  tools: "soak-tools",
  cancel_tree: "soak-cancel-tree",
};
