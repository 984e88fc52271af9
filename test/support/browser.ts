/**
 * A real headless Chromium (Debian's `chromium`, installed by scripts/test-deps.mjs) driven by
 * puppeteer-core, for the dashboard's tests: one browser per test file, a fresh context (its own
 * sessionStorage) per case, an accessibility check with axe-core, and the bytes a page load moved.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

/** Where Debian puts it; CHROMIUM_PATH names another. */
export function chromiumPath(): string {
  const file = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
  if (!existsSync(file)) {
    throw new Error(
      `the dashboard's tests need Chromium at ${file}: install Debian's chromium (npm run test:deps does), or set CHROMIUM_PATH`,
    );
  }
  return file;
}

export interface TestBrowser {
  browser: Browser;
  /** Closes the browser (by its own process) and removes its profile directory. */
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(path.join(os.tmpdir(), 'cutover-chromium-'));
  // Tests run as root: Chromium's sandbox refuses root, so it is off (the pages are our own).
  const browser = await puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    userDataDir: profile,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--no-first-run', '--disable-background-networking'],
  });
  return {
    browser,
    async close() {
      const child = browser.process();
      await browser.close().catch(() => child?.kill('SIGKILL'));
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** The page's document, as the function evaluated in it passes it to axe (tests compile without the DOM library). */
declare const document: unknown;

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * axe-core's serious and critical violations on the page as it is now (WCAG 2.1 A and AA and best
 * practices). axe is evaluated through the DevTools protocol, which the page's CSP does not govern;
 * the page itself never loads it.
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axeSource);
  const found = await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as { axe: { run(context: unknown, options: unknown): Promise<unknown> } }
    ).axe;
    const result = (await axe.run(document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] },
    })) as {
      passes: unknown[];
      violations: { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[];
    };
    // A check that looked at nothing proves nothing.
    if (result.passes.length === 0) throw new Error('axe-core checked no rule on this page');
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => JSON.stringify(n.target)),
    }));
  });
  return found.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

export interface PageLoad {
  /** Every URL the page asked for, in order. */
  urls: string[];
  /** Bytes received over the network (compressed bodies and headers), by Chromium's count. */
  bytes(): number;
}

/**
 * Records what a page asks for and how many bytes come back; a request to anything but `origin`
 * is recorded and failed, so a page that would load from a CDN is seen doing so.
 */
export async function recordRequests(page: Page, origin: string): Promise<PageLoad> {
  const urls: string[] = [];
  let bytes = 0;
  const cdp = await page.createCDPSession();
  await cdp.send('Network.enable');
  cdp.on('Network.loadingFinished', (event) => {
    bytes += event.encodedDataLength;
  });
  await page.setRequestInterception(true);
  page.on('request', (request) => {
    urls.push(request.url());
    const url = request.url();
    // A data: URL (the page's empty icon) is in the page itself: nothing leaves the machine.
    if (url.startsWith(`${origin}/`) || url.startsWith('data:')) void request.continue();
    else void request.abort('blockedbyclient');
  });
  return { urls, bytes: () => bytes };
}
