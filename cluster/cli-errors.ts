/**
 * How the `runway` command fails: its exit codes (a closed set, listed by `runway help` and
 * docs/cli.md) and the one line it prints on stderr for each kind of failure. A stack is for
 * developers only (`RUNWAY_DEBUG=1`): a person meets what failed, where, and what to do.
 */
import { ApiFault, ApiNoAnswer, type ApiAnswer } from "./client.js";

/** The exit codes of `runway`. */
export const EXIT = {
  /** The command did what it was asked (an idempotent answer such as `duplicate`, `exists` or `unchanged` included). */
  ok: 0,
  /** The API answered, and not with the command's success: a refusal, a not-found, a failed run or replay, a fault of the service. */
  refused: 1,
  /** The command line is wrong: unknown command or flag, missing argument, a value or file that is not what it must be. */
  usage: 2,
  /** No answer: the NATS server is unreachable or refused the credentials, or no node answered in time. */
  unreachable: 3,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** The command line is wrong; `command` names the usage to point at (`runway <command> --help`). */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message);
    this.name = "UsageError";
  }
}

/** No answer from NATS: the message says which server, and what to do. */
export class UnreachableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "UnreachableError";
  }
}

/** What a command did: what to print on stdout (nothing for a command that wrote its own lines), and whether it failed. */
export type Done = { print?: unknown; failed?: boolean };

/**
 * The outcomes each command counts as its success (exit 0); any other answer exits 1. An
 * idempotent answer is a success: the start key's run (`duplicate`), the tenant that is there
 * (`exists`), the definition as stored (`unchanged`). docs/cli.md lists the same table.
 */
export const SUCCESS = {
  "tenant create": ["created", "exists"],
  "tenant get": ["found"],
  "tenant put": ["updated"],
  "tenant kill": ["killed"],
  "tenant drain": ["draining"],
  "tenant resume": ["active"],
  "def put": ["published", "unchanged", "draft_saved"],
  "def get": ["found"],
  "def list": ["ok"],
  "def disable": ["disabled"],
  "def enable": ["enabled"],
  "run start": ["started", "duplicate"],
  "run get": ["found"],
  "run list": ["ok"],
  "run events": ["events"],
  "run watch": ["events"],
  "run cancel": ["cancelled", "cancel_requested"],
  "run signal": ["delivered"],
  "run held": ["ok"],
  "run trajectory": ["trajectory"],
  "run replay": ["replayed"],
  "run reconcile": ["settled"],
  "approvals ls": ["ok"],
  "approvals show": ["found"],
  "approvals approve": ["decided"],
  "approvals reject": ["decided"],
  "approvals edit": ["decided"],
  "tools servers put": ["saved"],
  "tools servers get": ["found"],
  "tools servers ls": ["ok"],
  "tools servers rm": ["deleted"],
  "tools ls": ["tools"],
  "tools call": ["ok"],
  "schedules put": ["saved"],
  "schedules get": ["found"],
  "schedules ls": ["ok"],
  "schedules rm": ["deleted"],
  "schedules pause": ["paused"],
  "schedules resume": ["resumed"],
  "agents expose": ["exposed"],
  "agents ls": ["ok"],
  "agents hide": ["hidden"],
  "keys create": ["created"],
  "keys ls": ["ok"],
  "keys revoke": ["revoked"],
  "models put": ["created", "updated"],
  "models list": ["ok"],
  "models get": ["found"],
  "models delete": ["deleted"],
  "ops dead-letters": ["ok"],
} as const satisfies Record<string, readonly string[]>;
export type CommandForm = keyof typeof SUCCESS;

/** An API answer as the result of `form`: failed unless its outcome is one of the form's SUCCESS. */
export function answered(form: CommandForm, answer: ApiAnswer): Done {
  return { print: answer, failed: !(SUCCESS[form] as readonly string[]).includes(answer.outcome) };
}

/** A nats.js error's name (its classes are matched by name: the CLI may run a bundled copy of the library). */
function natsErrorName(err: unknown): string {
  return err instanceof Error ? err.name : "";
}

/**
 * A failure to connect to `servers`, told as one line: refused or unknown host (start a server,
 * or point elsewhere), credentials refused (check them), or anything else nats.js said.
 */
export function connectFailure(err: unknown, servers: string, user: string | undefined, nkey?: string): UnreachableError {
  const name = natsErrorName(err);
  const message = err instanceof Error ? err.message : String(err);
  const cause = (err as { cause?: { code?: string } } | undefined)?.cause?.code;
  if (name === "AuthorizationError" || name === "UserAuthenticationExpiredError" || /authoriz|authentic/i.test(message))
    return new UnreachableError(
      `NATS at ${servers} refused the credentials${credentials(user, nkey)}: check ${nkey ? "--nkey" : user ? "--user and --pass" : "--user and --pass, or --nkey (env RUNWAY_NKEY)"}`,
      {
        cause: err,
      },
    );
  const why = cause === "ECONNREFUSED" ? "connection refused" : message;
  return new UnreachableError(`cannot reach NATS at ${servers} (${why}): start one with \`runway dev\`, or point --servers (env RUNWAY_SERVERS) at yours`, {
    cause: err,
  });
}

function credentials(user: string | undefined, nkey: string | undefined): string {
  if (nkey) return ` of the key in ${nkey}`;
  return user ? ` of user "${user}"` : " (none given)";
}

/** One line: what a message quotes from a file or flag may hold line breaks. */
function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, " ");
}

/**
 * The one line and the exit code for an error that ended a command. `command`: the command the
 * line was for (a usage hint names its `--help`); `servers`: the NATS URLs it was pointed at.
 */
export function describeFailure(err: unknown, context: { command?: string | undefined; servers?: string | undefined }): { line: string; code: ExitCode } {
  const described = describe(err, context);
  return { ...described, line: oneLine(described.line) };
}

function describe(err: unknown, context: { command?: string | undefined; servers?: string | undefined }): { line: string; code: ExitCode } {
  const { servers } = context;
  if (err instanceof UsageError) {
    const command = err.command ?? context.command;
    return { line: `${err.message} (usage: runway ${command ? `${command} ` : ""}--help)`, code: EXIT.usage };
  }
  // node:util parseArgs refuses an unknown or malformed option with a TypeError coded ERR_PARSE_ARGS_*.
  if (err instanceof TypeError && String((err as { code?: unknown }).code).startsWith("ERR_PARSE_ARGS")) {
    // Its first sentence says what is wrong; the rest explains `--` to a programmer.
    const what = err.message.split(/\. (?=[A-Z])/)[0];
    return { line: `${what} (usage: runway ${context.command ? `${context.command} ` : ""}--help)`, code: EXIT.usage };
  }
  if (err instanceof UnreachableError) return { line: err.message, code: EXIT.unreachable };
  if (err instanceof ApiNoAnswer) {
    const where = servers ? ` at ${servers}` : "";
    if (err.reason === "no_responders")
      return { line: `no Runway node serves ${err.subject}${where}: start one with \`runway dev\` or \`runway node\``, code: EXIT.unreachable };
    if (err.reason === "timeout")
      return {
        line: `no answer to ${err.subject}${where} within ${err.timeoutMs / 1000} s: the nodes may be busy or stopping; try again`,
        code: EXIT.unreachable,
      };
    if (err.reason === "too_large")
      return { line: `the request to ${err.subject} is larger than the NATS server${where} accepts: send less (a smaller file or input)`, code: EXIT.usage };
    return { line: `${err.subject}: the connection to NATS${where} closed before the answer came; try again`, code: EXIT.unreachable };
  }
  if (err instanceof ApiFault)
    return { line: `the service failed (${err.code}${err.code === 503 ? ", retrying may help" : ""}): ${err.message}`, code: EXIT.refused };
  const name = natsErrorName(err);
  if (name === "ConnectionError" || name === "AuthorizationError" || name === "ClosedConnectionError")
    return { line: connectFailure(err, servers ?? "NATS", undefined).message, code: EXIT.unreachable };
  if (name === "PermissionViolationError")
    return { line: `NATS${servers ? ` at ${servers}` : ""} refused this user a subject: ${(err as Error).message}`, code: EXIT.unreachable };
  const message = err instanceof Error ? err.message : String(err);
  return { line: `${message} (RUNWAY_DEBUG=1 prints the stack)`, code: EXIT.refused };
}
