import type { NatsConnection } from "@nats-io/transport-node";
import { rawRequest, SERVICE_ERROR_CODE_HEADER, SERVICE_ERROR_HEADER } from "../runtime/index.js";
import type { ApiAnswer, ExposeAgentRequest, ListApprovalsRequest, StartRunRequest } from "../gateways/index.js";

export type { ApiAnswer };

export class ApiFault extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = "ApiFault";
  }
}

/** A request that got no answer: `timeout`, `no_responders` (no node serves the API) or the connection `closed`. */
export class ApiNoAnswer extends Error {
  constructor(
    readonly subject: string,
    readonly reason: string,
    readonly timeoutMs: number,
  ) {
    super(`${subject}: ${reason === "no_responders" ? "no responders (is a Runway node running?)" : reason}`);
    this.name = "ApiNoAnswer";
  }
}

/** A thin client of the `runway` micro service, used by the CLI, the demo and tests. */
export class RunwayClient {
  constructor(
    private readonly nc: NatsConnection,
    private readonly tenant: string,
    private readonly timeoutMs = 15_000,
  ) {}

  /**
   * One API request. Through the runtime's request mux (one inbox subscription, no Error built
   * per call as the client's own `request()` does); a request that gets no answer throws:
   * `timeout`, `no responders` (no node serves the API), or the connection `closed`.
   */
  call(subject: string, body: unknown): Promise<ApiAnswer> {
    return this.callText(subject, JSON.stringify(body ?? {}));
  }

  /** {@link call} with the body as sent (the console passes a page's body on unparsed: the API judges it). */
  async callText(subject: string, body: string): Promise<ApiAnswer> {
    const answer = await rawRequest(this.nc, subject, body, { timeoutMs: this.timeoutMs });
    if (!answer.ok) throw new ApiNoAnswer(subject, answer.reason, this.timeoutMs);
    const reply = answer.msg;
    const error = reply.headers?.get(SERVICE_ERROR_HEADER);
    if (error) throw new ApiFault(Number(reply.headers?.get(SERVICE_ERROR_CODE_HEADER) ?? 500), error);
    return JSON.parse(reply.string()) as ApiAnswer;
  }

  private t(path: string, body: unknown = {}): Promise<ApiAnswer> {
    return this.call(`runway.v1.${this.tenant}.${path}`, body);
  }

  createTenant(id: string, settings?: Record<string, unknown>) {
    return this.call("runway.v1.ops.tenants.put", { id, ...(settings ? { settings } : {}) });
  }
  setTenantState(id: string, to: "kill" | "drain" | "resume", reason = "operator") {
    return this.call(`runway.v1.ops.tenants.${to}`, { id, reason });
  }
  getTenant() {
    return this.t("tenant.get");
  }
  putTenant(settings: Record<string, unknown>) {
    return this.t("tenant.put", { settings });
  }
  putDefinition(definition: unknown, publish = true) {
    return this.t("definitions.put", { definition, publish });
  }
  getDefinition(name: string, version?: number) {
    return this.t("definitions.get", { name, ...(version ? { version } : {}) });
  }
  listDefinitions() {
    return this.t("definitions.list");
  }
  /** Disables (`disabled: false`: enables) a published definition: disabled, it refuses new top-level starts. */
  setDefinitionDisabled(name: string, disabled: boolean) {
    return this.t(disabled ? "definitions.disable" : "definitions.enable", { name });
  }
  exposeAgent(request: ExposeAgentRequest) {
    return this.t("agents.expose", request);
  }
  listAgents() {
    return this.t("agents.list");
  }
  hideAgent(name: string) {
    return this.t("agents.hide", { name });
  }
  /** A new API key: the answer's `token` is shown this once. */
  createKey(request: { name: string; groups?: string[]; interactive?: boolean }) {
    return this.t("keys.create", request);
  }
  listKeys() {
    return this.t("keys.list");
  }
  revokeKey(name: string) {
    return this.t("keys.revoke", { name });
  }
  startRun(request: StartRunRequest) {
    return this.t("runs.start", request);
  }
  getRun(runId: string) {
    return this.t("runs.get", { run_id: runId });
  }
  /** A page of the tenant's runs (children, then live runs, then ended ones: see `runs.list`); pass the answer's `next_cursor` as `cursor` for the next. */
  listRuns(options: { status?: string; limit?: number; cursor?: string } = {}) {
    return this.t("runs.list", options);
  }
  /** A page of a run's stored progress events after the event id `after` (none: from the first); go on from the answer's `last` while `more`. */
  runEvents(runId: string, options: { after?: string; limit?: number } = {}) {
    return this.t("runs.events", { run_id: runId, ...options });
  }
  cancelRun(runId: string, reason?: string) {
    return this.t("runs.cancel", { run_id: runId, ...(reason ? { reason } : {}) });
  }
  /** The tenant's pending approvals, soonest deadline first. */
  approvals(filter: ListApprovalsRequest = {}) {
    return this.t("approvals.list", filter);
  }
  approval(id: string) {
    return this.t("approvals.get", { id });
  }
  decide(id: string, decision: "approve" | "reject" | "edit", options: { payload?: unknown; reason?: string; by?: string } = {}) {
    return this.t("approvals.decide", { id, decision, ...options });
  }
  /** A named signal for the run's `wait` nodes (`data`: what they output). */
  signal(runId: string, name: string, data?: unknown) {
    return this.t("runs.signal", { run_id: runId, name, ...(data !== undefined ? { data } : {}) });
  }
  /** Settles a step held on an intent whose outcome is unknown: `done` (with the call's `result`), `retry` or `abandon`. */
  reconcile(runId: string, key: string, decision: "done" | "retry" | "abandon", options: { result?: unknown; by?: string } = {}) {
    return this.t("runs.reconcile", { run_id: runId, key, decision, ...options });
  }
  /** The tenant's steps held for reconciliation (of one run, if given), oldest first. */
  reconciliations(runId?: string) {
    return this.t("runs.reconciliations", runId ? { run_id: runId } : {});
  }
  /** The run's steps, tool calls and outcome as its journal holds them. */
  trajectory(runId: string) {
    return this.t("runs.trajectory", { run_id: runId });
  }
  /** Re-executes a finished run with every tool call answered from its receipts, and compares the trajectories. */
  replay(runId: string, waitMs?: number) {
    return this.t("runs.replay", { run_id: runId, ...(waitMs !== undefined ? { wait_ms: waitMs } : {}) });
  }
  putToolServer(server: Record<string, unknown>) {
    return this.t("tools.servers.put", { server });
  }
  getToolServer(name: string) {
    return this.t("tools.servers.get", { name });
  }
  listToolServers() {
    return this.t("tools.servers.list");
  }
  deleteToolServer(name: string) {
    return this.t("tools.servers.delete", { name });
  }
  /** Creates or replaces a model provider; the answer shows its view (`api_key_set`, never the key). */
  putModelProvider(provider: Record<string, unknown>) {
    return this.t("models.put", { provider });
  }
  getModelProvider(name: string) {
    return this.t("models.get", { name });
  }
  listModelProviders() {
    return this.t("models.list");
  }
  deleteModelProvider(name: string) {
    return this.t("models.delete", { name });
  }
  /** Every tool of the tenant's servers (or of one) with its effective class. */
  listTools(server?: string) {
    return this.t("tools.list", server ? { server } : {});
  }
  /** Creates or replaces a schedule (docs/schedules.md). */
  putSchedule(schedule: Record<string, unknown>) {
    return this.t("schedules.put", { schedule });
  }
  getSchedule(name: string) {
    return this.t("schedules.get", { name });
  }
  listSchedules() {
    return this.t("schedules.list");
  }
  deleteSchedule(name: string) {
    return this.t("schedules.delete", { name });
  }
  pauseSchedule(name: string) {
    return this.t("schedules.pause", { name });
  }
  resumeSchedule(name: string) {
    return this.t("schedules.resume", { name });
  }
  /** The newest dead letters first (`runway.v1.ops.dead_letters`). */
  deadLetters(limit?: number) {
    return this.call("runway.v1.ops.dead_letters", limit !== undefined ? { limit } : {});
  }
}
