/** How a tool may be called again: what reconciliation may do with an intent whose outcome is unknown. */
export type ToolClass = "read_only" | "idempotent" | "non_idempotent";

/** MCP `ToolAnnotations` (hints; unchanged in 2025-11-25 and 2026-07-28). */
export interface ToolHints {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/** Where a tool's effective class came from. */
export type ClassSource = "override" | "annotations" | "default";

/**
 * A tool's effective class, pessimistic by default: annotations are hints a server makes about
 * itself, so they count only when the tenant marked the server trusted; otherwise every tool is
 * a non-idempotent write (intent journaled, never called again blindly). An operator's override
 * for the tool wins over both.
 */
export function effectiveClass(
  annotations: ToolHints | undefined,
  server: { trusted: boolean; overrides?: Readonly<Record<string, ToolClass>> },
  tool: string,
): { class: ToolClass; source: ClassSource } {
  const override = server.overrides?.[tool];
  if (override) return { class: override, source: "override" };
  if (!server.trusted || !annotations) return { class: "non_idempotent", source: "default" };
  if (annotations.readOnlyHint === true) return { class: "read_only", source: "annotations" };
  if (annotations.idempotentHint === true) return { class: "idempotent", source: "annotations" };
  return { class: "non_idempotent", source: "annotations" };
}

/** Whether an intent of this class whose outcome is unknown may be settled by calling again with the same key. */
export function safeToCallAgain(c: ToolClass): boolean {
  return c !== "non_idempotent";
}

/** A resource a run wrote (C074): the `item_kind` its tool node declares, and a returned row's `id`. */
export type ResourceRef = { kind: string; id: string };

/** At most this many refs from one call (a longer list adds its first ones). */
export const MAX_CALL_REFS = 1_000;

/**
 * The refs one successful tool call adds to its run (seed 004, "What a workflow run produces"): none
 * for a read (`read_only`) or a node that declares no `item_kind`; else one per returned row with an
 * `id` (a string, or a finite number as its decimal text), in returned order. A row is the output
 * itself, or each element of it when it is a list, or of its `items` list; a row with no id adds none.
 */
export function writeRefs(kind: string | undefined, cls: ToolClass, output: unknown): ResourceRef[] {
  return kind === undefined || cls === "read_only" ? [] : refsIn(kind, output);
}

/** The refs of kind `kind` an output names, the call already known to be a write (see {@link writeRefs}). */
export function refsIn(kind: string, output: unknown): ResourceRef[] {
  const rows = Array.isArray(output) ? output : isRecord(output) && Array.isArray(output.items) && idOf(output) === undefined ? output.items : [output];
  const refs: ResourceRef[] = [];
  for (const row of rows) {
    const id = isRecord(row) ? idOf(row) : undefined;
    if (id !== undefined) refs.push({ kind, id });
    if (refs.length === MAX_CALL_REFS) break;
  }
  return refs;
}

/**
 * A run's refs: its nodes' in declaration order, each `(kind, id)` pair once (the first wins).
 * `perNode` is read in the order given.
 */
export function mergeRefs(perNode: Iterable<readonly ResourceRef[] | undefined>): ResourceRef[] {
  const seen = new Set<string>();
  const out: ResourceRef[] = [];
  for (const refs of perNode)
    for (const r of refs ?? []) {
      const key = `${r.kind}\u0000${r.id}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(r);
    }
  return out;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function idOf(row: Record<string, unknown>): string | undefined {
  const id = row.id;
  if (typeof id === "string" && id.length > 0 && id.length <= 256) return id;
  if (typeof id === "number" && Number.isFinite(id)) return String(id);
  return undefined;
}
