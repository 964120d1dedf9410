import type { AnyStateMachine } from "xstate";
import { executionMachine } from "./execution/index.js";
import { tenantMachine } from "./tenant/index.js";

interface NodeLike {
  key: string;
  id: string;
  type: string;
  states: Record<string, NodeLike>;
  transitions: Map<string, TransitionLike[]>;
  always?: TransitionLike[];
}

interface TransitionLike {
  target?: NodeLike[];
  guard?: unknown;
  actions: readonly unknown[];
}

function nameOf(x: unknown): string | undefined {
  if (typeof x === "string") return x;
  if (x && typeof x === "object" && "type" in x) {
    const t = (x as { type: unknown; params?: unknown }).type;
    const params = (x as { params?: unknown }).params;
    return typeof t === "string" ? (params ? `${t}(${JSON.stringify(params)})` : t) : undefined;
  }
  return undefined;
}

function label(event: string, t: TransitionLike): string {
  const guard = nameOf(t.guard);
  const actions = t.actions.map(nameOf).filter((a): a is string => !!a && !a.startsWith("xstate."));
  return `${event}${guard ? ` [${guard}]` : ""}${actions.length > 0 ? ` / ${actions.join(", ")}` : ""}`;
}

/**
 * A machine as a Mermaid state diagram (`stateDiagram-v2`), read from the machine itself: every
 * state, every transition with its named guard and actions (a transition without a target stays
 * in its state), `always` transitions as `always`. Pure: what `runway machines` prints and the
 * READMEs embed, so a diagram is never drawn by hand.
 */
export function mermaidOf(machine: AnyStateMachine): string {
  const lines = ["stateDiagram-v2"];
  const root = (machine as unknown as { root: NodeLike }).root;
  const id = (n: NodeLike) => n.id.replace(/[^A-Za-z0-9_]/g, "_");
  const walk = (node: NodeLike) => {
    for (const child of Object.values(node.states)) {
      lines.push(`  state "${child.key}" as ${id(child)}`);
      if (child.type === "final") lines.push(`  ${id(child)} --> [*]`);
    }
    const initial = (machine as unknown as { config: { initial?: string } }).config.initial;
    if (node === root && initial && node.states[initial]) lines.push(`  [*] --> ${id(node.states[initial]!)}`);
    for (const child of Object.values(node.states)) {
      const edges: [string, TransitionLike][] = [...child.transitions.entries()].flatMap(([event, ts]) =>
        ts.map((t) => [event, t] as [string, TransitionLike]),
      );
      for (const t of child.always ?? []) edges.push(["always", t]);
      for (const [event, t] of edges) {
        const targets = t.target && t.target.length > 0 ? t.target : [child];
        for (const target of targets) lines.push(`  ${id(child)} --> ${id(target)}: ${label(event, t).replace(/:/g, "∶")}`);
      }
      if (Object.keys(child.states).length > 0) walk(child);
    }
  };
  walk(root);
  return `${lines.join("\n")}\n`;
}

/** The machines that run in production (a step's lifecycle is the step table's primitive, inside its run). */
export const PRODUCTION_MACHINES: readonly { name: string; machine: AnyStateMachine }[] = [
  { name: "run", machine: executionMachine },
  { name: "tenant", machine: tenantMachine },
];

/** Every production machine as a Markdown section with its Mermaid diagram: what `runway machines` prints and machines/README.md embeds. */
export function machineDiagrams(): string {
  return PRODUCTION_MACHINES.map(({ name, machine }) => `### ${name}\n\n\`\`\`mermaid\n${mermaidOf(machine)}\`\`\`\n`).join("\n");
}
