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
