// What the driver scripts of the real VS Code tests share: Chromium on code-server's page, each
// step recorded with a screenshot, what the page shows (status bar, toasts, code lenses, inlay
// hints, Problems, tabs, hovers, a webview's report) and what a user does (shortcuts, Quick Open,
// the Command Palette, clicking a code lens). `open(config)` returns them bound to one page.
import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// Monaco renders spaces as no-break spaces.
export const plain = (text) => (text ?? '').replace(/\u00a0/g, ' ');
export const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Starts Chromium for `config` (chromium, profile, chromePidFile, shots, results, uiTimeoutMs,
 * modelLines) and returns the page with the helpers bound to it; `results.steps` collects the steps. */
export async function open(config) {
  const results = { steps: [] };
  const save = () => fs.writeFileSync(config.results, JSON.stringify(results, null, 2));
  const browser = await puppeteer.launch({
    executablePath: config.chromium,
    headless: true,
    pipe: true, // DevTools over a pipe: the browser opens no port
    userDataDir: config.profile,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-dev-shm-usage'],
    defaultViewport: { width: 1400, height: 900 },
  });
  fs.writeFileSync(config.chromePidFile, String(browser.process()?.pid ?? ''));
  const page = await browser.newPage();
  const consoleErrors = [];
  page.on('console', (message) => {
    if (message.type() === 'error') {
      consoleErrors.push(message.text().slice(0, 300));
    }
  });

  /** Polls `observe()` until `done(seen)` or the timeout; returns the last thing seen either way. */
  async function poll(observe, done, timeoutMs = config.uiTimeoutMs) {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const seen = await observe();
      if (done(seen) || Date.now() > until) {
        return seen;
      }
      await sleep(250);
    }
  }

  let number = 0;
  /** Runs one step, records what it saw (or its error) and screenshots the page. */
  async function step(name, body, { fatal = false } = {}) {
    number += 1;
    const entry = { name, screenshot: path.join(config.shots, `${String(number).padStart(2, '0')}-${name}.png`) };
    results.steps.push(entry);
    const started = Date.now();
    try {
      entry.seen = await body();
      entry.ok = true;
    } catch (error) {
      entry.ok = false;
      entry.error = String(error?.stack ?? error);
    }
    entry.seconds = (Date.now() - started) / 1000;
    await page.screenshot({ path: entry.screenshot }).catch((error) => {
      entry.screenshotError = String(error);
    });
    save();
    if (fatal && !entry.ok) {
      throw new Error(`step ${name} failed: ${entry.error}`);
    }
    return entry.seen;
  }

  // What the page shows --------------------------------------------------------------------------

  const statusText = () =>
    page.evaluate(() =>
      [...document.querySelectorAll('.statusbar-item')].map((item) => item.innerText.trim()).find((text) => text.startsWith('torchscan:')) ?? null,
    );

  const restrictedMode = () =>
    page.evaluate(() => [...document.querySelectorAll('.statusbar-item')].some((item) => item.innerText.includes('Restricted Mode')));

  const toasts = () =>
    page.evaluate(() =>
      [...document.querySelectorAll('.notification-toast')].map((toast) => ({
        message: toast.querySelector('.notification-list-item-message')?.innerText ?? toast.innerText,
        buttons: [...toast.querySelectorAll('.monaco-button')].map((button) => button.innerText),
      })),
    );

  /** The code lens titles of the active editor, in order. */
  const lenses = () =>
    page.evaluate(() =>
      [...document.querySelectorAll('.editor-group-container.active .codelens-decoration a')].map((a) => a.textContent.replace(/\u00a0/g, ' ')),
    );

  /**
   * The inlay hints of the active editor by 0-based line: each rendered line's text after the
   * source line's own text (the whole file is on screen, so rendered lines are source lines in order).
   */
  async function hints() {
    const rendered = await page.evaluate(() =>
      [...document.querySelectorAll('.editor-group-container.active .view-line')]
        .map((line) => ({ top: parseFloat(line.style.top), text: line.innerText }))
        .sort((a, b) => a.top - b.top)
        .map((line) => line.text),
    );
    const found = {};
    rendered.forEach((text, index) => {
      const source = config.modelLines[index] ?? '';
      const shown = plain(text);
      const extra = shown.startsWith(source) ? shown.slice(source.length).trim() : `(line shows ${JSON.stringify(shown)})`;
      if (extra) {
        found[index] = extra;
      }
    });
    return found;
  }

  const problems = () =>
    page.evaluate(() =>
      [...document.querySelectorAll('.markers-panel .monaco-list-row')].map((row) => row.getAttribute('aria-label') ?? row.innerText),
    );

  const tabs = () =>
    page.evaluate(() => [...document.querySelectorAll('.tab')].map((tab) => tab.innerText.replace(/\n/g, '')));

  const hoverText = () =>
    page.evaluate(() =>
      [...document.querySelectorAll('.monaco-hover:not(.hidden)')].map((hover) => hover.innerText).filter((text) => text.trim()).join('\n'),
    );

  // What the user does -----------------------------------------------------------------------------

  /** Presses `keys` together (modifiers first), as one shortcut. */
  async function chord(...keys) {
    for (const key of keys) {
      await page.keyboard.down(key);
    }
    for (const key of [...keys].reverse()) {
      await page.keyboard.up(key);
    }
  }

  /** Opens `relative` with Quick Open (Ctrl+P), as a user types it; again when the list, still
   * filling in (a workbench that has just loaded is still indexing its files), showed nothing to
   * open or swallowed the Enter. */
  async function quickOpen(relative) {
    const name = path.basename(relative);
    const active = () => page.evaluate(() => document.querySelector('.tab.active')?.innerText.replace(/\n/g, '') ?? null);
    for (let attempt = 1; ; attempt += 1) {
      await chord('Control', 'KeyP');
      await page.waitForSelector('.quick-input-widget input', { visible: true, timeout: config.uiTimeoutMs });
      await page.keyboard.type(relative);
      const listed = await page
        .waitForFunction(
          (wanted) => document.querySelector('.quick-input-list .monaco-list-row.focused')?.innerText.includes(wanted),
          { timeout: config.uiTimeoutMs },
          name,
        )
        .then(() => true, () => attempt === 3 && Promise.reject(new Error(`Quick Open never listed ${relative}`)));
      if (listed) {
        await page.keyboard.press('Enter');
        if ((await poll(active, (tab) => tab === name, 5000)) === name) {
          return;
        }
      }
      if (attempt === 3) {
        throw new Error(`Quick Open did not open ${relative}`);
      }
      await page.keyboard.press('Escape');
    }
  }

  /** Runs a command from the Command Palette (F1), by its title. */
  async function palette(title) {
    await page.keyboard.press('F1');
    await page.waitForSelector('.quick-input-widget input', { visible: true, timeout: config.uiTimeoutMs });
    await page.keyboard.type(title);
    await page.waitForFunction(
      (wanted) => document.querySelector('.quick-input-list .monaco-list-row.focused')?.innerText.includes(wanted),
      { timeout: config.uiTimeoutMs },
      title,
    );
    await page.keyboard.press('Enter');
  }

  /** Clicks the code lens whose title is `title` (or matches it, for a RegExp source). */
  async function clickLens(title) {
    const handle = await page.waitForFunction(
      (wanted) =>
        [...document.querySelectorAll('.editor-group-container.active .codelens-decoration a')].find((a) =>
          new RegExp(wanted).test(a.textContent.replace(/\u00a0/g, ' ')),
        ),
      { timeout: config.uiTimeoutMs },
      title,
    );
    await handle.asElement().click();
  }

  /** Shows the Problems panel (View: Show Problems, Ctrl+Shift+M) unless it is open. */
  async function showProblems() {
    const open = await page.evaluate(() => document.querySelector('.markers-panel')?.offsetParent != null);
    if (!open) {
      await chord('Control', 'Shift', 'KeyM');
      await page.waitForSelector('.markers-panel', { visible: true, timeout: config.uiTimeoutMs });
    }
  }


  /** The report a webview tab shows (its inner frame, VS Code's pre/fake.html filled with the page), or null. */
  async function webviewReport() {
    let report = null;
    const until = Date.now() + config.uiTimeoutMs;
    while (report === null && Date.now() < until) {
      for (const frame of page.frames()) {
        if (!frame.url().includes('/webview/browser/pre/fake.html')) {
          continue;
        }
        report = await frame
          .evaluate(() => ({
            title: document.title,
            contentSecurityPolicy: document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.content ?? null,
            scripts: document.scripts.length,
            text: document.body?.innerText.slice(0, 4000) ?? '',
            plan: document.querySelector('#plan')?.innerText.slice(0, 4000) ?? null,
            charts: document.querySelectorAll('svg.plan-chart').length,
          }))
          .catch(() => null);
        // fake.html is titled "Fake" until VS Code has written the page into it
        if (report?.contentSecurityPolicy) {
          break;
        }
        report = null;
      }
      if (report === null) {
        await sleep(250);
      }
    }
    return report;
  }

  /** Closes the window as a user closes its tab, then the browser: the workbench unloads, so
   * code-server ends the window's extension host at once (a browser that just vanished leaves it
   * waiting for a reconnection, for hours). */
  async function close() {
    await page.goto('about:blank', { timeout: config.uiTimeoutMs }).catch(() => {});
    await browser.close();
  }

  return {
    browser, page, results, save, consoleErrors, poll, step, close, statusText, restrictedMode, toasts, lenses, hints,
    problems, tabs, hoverText, chord, quickOpen, palette, clickLens, showProblems, webviewReport,
  };
}
