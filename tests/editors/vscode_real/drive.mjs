// Drives one code-server session in Debian's headless Chromium through puppeteer-core, as a user
// would, and writes what the page showed at each step (JSON) and a screenshot of it. The caller
// (tests/editors/test_vscode_real.py) starts code-server, checks the JSON and stops every process.
//
// Usage: node drive.mjs CONFIG.json, CONFIG holding: url, folder, model and broken (paths below the
// folder), modelLines (the model file's lines), expected ({hints: {line: label}, totals}), python
// (the interpreter with the package), machineSettings (code-server's Remote settings file), shots,
// results, profile, chromium (the browser binary), chromePidFile, uiTimeoutMs, analysisTimeoutMs.
//
// A step that fails is recorded with its error and screenshot; the steps after it still run when
// they do not depend on it, so one missing hint does not hide what else works.
import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const results = { steps: [] };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const save = () => fs.writeFileSync(config.results, JSON.stringify(results, null, 2));
// Monaco renders spaces as no-break spaces.
const plain = (text) => (text ?? '').replace(/\u00a0/g, ' ');

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
 * filling in, swallowed the Enter. */
async function quickOpen(relative) {
  const name = path.basename(relative);
  const active = () => page.evaluate(() => document.querySelector('.tab.active')?.innerText.replace(/\n/g, '') ?? null);
  for (let attempt = 1; ; attempt += 1) {
    await chord('Control', 'KeyP');
    await page.waitForSelector('.quick-input-widget input', { visible: true, timeout: config.uiTimeoutMs });
    await page.keyboard.type(relative);
    await page.waitForFunction(
      (wanted) => document.querySelector('.quick-input-list .monaco-list-row.focused')?.innerText.includes(wanted),
      { timeout: config.uiTimeoutMs },
      name,
    );
    await page.keyboard.press('Enter');
    if ((await poll(active, (tab) => tab === name, 5000)) === name) {
      return;
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

const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const expectedHints = Object.entries(config.expected.hints);
const hintsComplete = (seen) => expectedHints.every(([line, label]) => seen[line] === label);

// The session -----------------------------------------------------------------------------------

try {
  await step(
    'workbench',
    async () => {
      await page.goto(`${config.url}?folder=${encodeURIComponent(config.folder)}`, { waitUntil: 'domcontentloaded' });
      await page.waitForSelector('.monaco-workbench', { timeout: config.uiTimeoutMs });
      return { restrictedMode: await poll(restrictedMode, Boolean) };
    },
    { fatal: true },
  );

  await step(
    'interpreter-advice',
    async () => {
      await quickOpen(config.model);
      const seen = await poll(toasts, (list) => list.some((toast) => toast.message.startsWith('torchscan-lsp: ')), config.analysisTimeoutMs);
      return { toasts: seen, status: await statusText() };
    },
    { fatal: true },
  );

  await step(
    'restricted-mode',
    async () => {
      await palette('Notifications: Clear All Notifications');
      // The fix the message names: the interpreter in code-server's Remote settings.
      fs.writeFileSync(config.machineSettings, JSON.stringify({ 'torchscan.python': config.python }, null, 1));
      const status = await poll(statusText, (text) => text === 'torchscan: untrusted', config.analysisTimeoutMs);
      // (before the Problems panel takes the focus: VS Code draws lenses that arrive meanwhile only
      // once the editor has it again)
      const titles = await poll(lenses, (list) => list.length > 0);
      await showProblems();
      const rows = await poll(problems, (list) => list.some((row) => row.includes('untrusted workspace')));
      return { status, restrictedMode: await restrictedMode(), lenses: titles, problems: rows };
    },
    { fatal: true },
  );

  await step(
    'trust-editor',
    async () => {
      await clickLens('^torchscan: not analysed');
      const heading = () =>
        page.evaluate(() => document.querySelector('.workspace-trust-editor .workspace-trust-title-text')?.innerText ?? null);
      return { heading: await poll(heading, Boolean) };
    },
    { fatal: true },
  );

  await step(
    'trusted',
    async () => {
      const trust = await page.waitForSelector('.workspace-trust-editor .monaco-button::-p-text(Trust)', { timeout: config.uiTimeoutMs });
      await trust.click();
      const close = await page.waitForSelector('a[aria-label^="Close Modal Editor"]', { timeout: config.uiTimeoutMs });
      await close.click();
      const status = await poll(statusText, (text) => text === 'torchscan: done', config.analysisTimeoutMs);
      return { status, restrictedMode: await restrictedMode() };
    },
    { fatal: true },
  );

  await step('inlay-hints', async () => ({ hints: await poll(hints, hintsComplete, config.analysisTimeoutMs) }));

  await step('code-lens', async () => ({
    lenses: await poll(lenses, (titles) => titles[0] === config.expected.totals),
  }));

  await step('hover', async () => {
    // Cursor on the Conv2d of the line that builds it, then "Show or Focus Hover" (Ctrl+K Ctrl+I).
    const point = await page.evaluate(() => {
      const span = [...document.querySelectorAll('.editor-group-container.active .view-line span span')].find((s) =>
        s.textContent.includes('Conv2d'),
      );
      const box = span.getBoundingClientRect();
      return { x: box.right - 4, y: box.top + box.height / 2 };
    });
    await page.mouse.click(point.x, point.y);
    await chord('Control', 'KeyK');
    await chord('Control', 'KeyI');
    return { hover: await poll(hoverText, (shown) => shown.includes('Parameters:')) };
  });

  await step('problems', async () => {
    await page.keyboard.press('Escape'); // the hover
    await quickOpen(config.broken);
    const status = await poll(statusText, (text) => text === 'torchscan: failed', config.analysisTimeoutMs);
    await showProblems();
    const rows = await poll(problems, (list) => list.some((row) => row.startsWith('Error: ')));
    return { status, problems: rows };
  });

  await step('measure-latency', async () => {
    await quickOpen(config.model);
    await poll(statusText, (text) => text === 'torchscan: done');
    await clickLens('^Measure latency$');
    const latency = new RegExp(`^${escape(config.expected.totals)} · [\\d.]+ (ns|µs|ms|s)$`);
    return { lenses: await poll(lenses, (titles) => latency.test(titles[0] ?? ''), config.analysisTimeoutMs), status: await statusText() };
  });

  await step('measure-memory', async () => {
    await clickLens('^Measure memory$');
    return { lenses: await poll(lenses, (titles) => /peak memory \+/.test(titles[0] ?? ''), config.analysisTimeoutMs) };
  });

  await step('plan-training', async () => {
    // what a user does: click the lens; the plan is a job of its own, its title says so meanwhile
    await clickLens('^Plan training$');
    const planning = await poll(lenses, (titles) => titles.includes('Planning…') || titles.includes('Plan training'));
    const done = await poll(lenses, (titles) => titles.includes('Plan training'), config.planTimeoutMs);
    // then the class line's hover (the target is the class): its card ends with the plan
    const point = await page.evaluate(() => {
      const span = [...document.querySelectorAll('.editor-group-container.active .view-line span span')].find((s) =>
        s.textContent.includes('Net'),
      );
      const box = span.getBoundingClientRect();
      return { x: box.left + 4, y: box.top + box.height / 2 };
    });
    await page.mouse.click(point.x, point.y);
    await chord('Control', 'KeyK');
    await chord('Control', 'KeyI');
    // "Training plan: planning…" until the plan job is done
    const hover = await poll(hoverText, (shown) => shown.includes('Training plan: budget'), config.planTimeoutMs);
    await page.keyboard.press('Escape');
    return { planning, lenses: done, hover, status: await statusText() };
  });

  await step('show-report', async () => {
    const before = (await tabs()).length;
    await clickLens('^Show report$');
    const shown = await poll(tabs, (list) => list.length > before, config.analysisTimeoutMs);
    // The webview's content lives in its inner frame, VS Code's pre/fake.html filled with the page.
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
    return { tabs: shown, report };
  });
} catch (error) {
  results.fatal = String(error?.message ?? error);
} finally {
  results.consoleErrors = consoleErrors;
  save();
  await browser.close();
}
