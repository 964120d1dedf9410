// The real browser the console's tests drive: Debian's `chromium` (scripts/ensure.mjs installs it
// when it can), found at RUNWAY_CHROMIUM or the usual paths, driven by playwright-core (which
// downloads no browser of its own).
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

const CANDIDATES = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable"];

/** The browser's executable, or undefined when this machine has none (its tests are skipped, saying so). */
export function chromiumPath(): string | undefined {
  const given = process.env.RUNWAY_CHROMIUM;
  if (given) return existsSync(given) ? given : undefined;
  return CANDIDATES.find((p) => existsSync(p));
}

/** A headless Chromium; `--no-sandbox` because tests may run as root in a container. */
export function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({ executablePath, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
}
