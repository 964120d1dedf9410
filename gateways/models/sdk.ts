/**
 * The provider SDKs, imported on first use: together they add about a quarter of a second to a
 * process start (every node restart, every CLI command), and most processes call no model.
 * Only this file imports them for their values (the lint's `model-sdks-on-first-use` rule).
 */
export type OpenAiSdk = typeof import("openai");
export type AnthropicSdk = typeof import("@anthropic-ai/sdk");

let openai: Promise<OpenAiSdk> | undefined;
let anthropic: Promise<AnthropicSdk> | undefined;

export function openaiSdk(): Promise<OpenAiSdk> {
  openai ??= import("openai");
  return openai;
}

export function anthropicSdk(): Promise<AnthropicSdk> {
  anthropic ??= import("@anthropic-ai/sdk");
  return anthropic;
}
