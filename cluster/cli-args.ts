/**
 * Values the `runway` command reads from its arguments and files, checked before anything is
 * sent: a value that is not what it must be is a UsageError naming the flag or file, never a
 * SyntaxError's stack.
 */
import { readFileSync } from "node:fs";
import { UsageError } from "./cli-errors.js";

/** The JSON text of a flag (`--input`, `--data`, …). */
export function jsonFlag(command: string, flag: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new UsageError(`${flag} ${JSON.stringify(text.length > 60 ? `${text.slice(0, 57)}...` : text)} is not JSON (${(err as Error).message})`, command);
  }
}

/** The JSON of a flag that must be an object (`--settings`, `--args`). */
export function jsonObjectFlag(command: string, flag: string, text: string): Record<string, unknown> {
  const value = jsonFlag(command, flag, text);
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new UsageError(`${flag} must be a JSON object`, command);
  return value as Record<string, unknown>;
}

/** A JSON file (`def put`, `tools servers put`, `--payload-file`). */
export function jsonFile(command: string, path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const code = (err as { code?: string }).code;
    const why =
      code === "ENOENT" ? "no such file" : code === "EISDIR" ? "a directory, not a file" : code === "EACCES" ? "permission denied" : (err as Error).message;
    throw new UsageError(`cannot read ${path}: ${why}`, command);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new UsageError(`${path} is not JSON (${(err as Error).message})`, command);
  }
}

/** A positive integer flag (`--limit`, `--version`), or undefined when absent. */
export function positiveInt(command: string, flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!(Number.isInteger(value) && value > 0)) throw new UsageError(`${flag} ${text}: expected a positive integer`, command);
  return value;
}
