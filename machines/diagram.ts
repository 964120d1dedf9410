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
}

function guardOf(t: TransitionLike): string | undefined {
  const g = t.guard;
  if (typeof g === "string") return g;
  if (g && typeof g === "object" && "type" in g && typeof (g as { type: unknown }).type === "string") return (g as { type: string }).type;
  return undefined;
}

/** Events per line of an "accepts" note: a note as wide as a page stays readable. */
const PER_LINE = 4;

/**
 * A machine as a Mermaid state diagram (`stateDiagram-v2`) a person can read, taken from the
 * machine itself: every state; each move to another state drawn once per event (with its guard
 * when one decides it); the events a state takes without leaving it listed in an "accepts" note
 * rather than drawn as loops. Pure: what `runway machines` prints and machines/README.md embeds.
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
      const moves = new Set<string>();
      const accepts = new Set<string>();
      for (const [event, t] of edges) {
        const targets = (t.target ?? []).filter((target) => target !== child);
        if (targets.length === 0) accepts.add(event);
        for (const target of targets) {
          const guard = guardOf(t);
          moves.add(`  ${id(child)} --> ${id(target)}: ${event}${guard ? ` [${guard}]` : ""}`);
        }
      }
      lines.push(...moves);
      if (accepts.size > 0) {
        const names = [...accepts];
        lines.push(`  note right of ${id(child)}`);
        for (let i = 0; i < names.length; i += PER_LINE) lines.push(`    ${i === 0 ? "accepts: " : "  "}${names.slice(i, i + PER_LINE).join(", ")}`);
        lines.push("  end note");
      }
      if (Object.keys(child.states).length > 0) {
        // A compound state is drawn as a composite: its children inside it, its own note outside.
        lines.push(`  state ${id(child)} {`);
        const inner = (child as NodeLike & { config?: { initial?: string } }).config?.initial;
        if (inner && child.states[inner]) lines.push(`  [*] --> ${id(child.states[inner]!)}`);
        walk(child);
        lines.push("  }");
      }
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
