import type { Answer } from "./api.js";

/** What a page gets: its route's parameters, a place to draw, timers and streams stopped when it is left. */
export interface Page {
  params: URLSearchParams;
  parts: string[];
  viewer: Answer;
  mount(...nodes: Node[]): void;
  go(route: string, params?: Record<string, string>): void;
  /** Runs `fn` every `ms` while the page is shown. */
  every(ms: number, fn: () => unknown): void;
  /** Aborted when the page is left. */
  signal: AbortSignal;
  gone(): boolean;
  tenant(): string;
  tenantPicker(route: string): HTMLElement;
}
