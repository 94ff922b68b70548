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
import { escape, open } from './page.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const ui = await open(config);
const { page, results, save, consoleErrors, poll, step, statusText, restrictedMode, toasts, lenses, hints } = ui;
const { problems, tabs, hoverText, chord, quickOpen, palette, clickLens, showProblems, webviewReport } = ui;

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
    // the lens still reads "Plan training" until the server has the job: wait for "Planning…" first
    const planning = await poll(lenses, (titles) => titles.includes('Planning…'));
    const done = await poll(lenses, (titles) => titles.includes('Plan training'), config.planTimeoutMs);
    // then the class line's hover (the target is the class): its card ends with the plan
    const point = await page.evaluate(() => {
      const span = [...document.querySelectorAll('.editor-group-container.active .view-line span span')].find((s) =>
        s.textContent.includes('Net'),
      );
      const box = span.getBoundingClientRect();
      return { x: box.left + 4, y: box.top + box.height / 2 };
    });
    // a shown hover is never refreshed: show it again until it has the plan ("planning…" before)
    const hovered = async () => {
      await page.keyboard.press('Escape');
      await page.mouse.click(point.x, point.y);
      await chord('Control', 'KeyK');
      await chord('Control', 'KeyI');
      return poll(hoverText, (shown) => shown.includes('Training plan'));
    };
    const hover = await poll(hovered, (shown) => shown.includes('Training plan: budget'), config.planTimeoutMs);
    await page.keyboard.press('Escape');
    return { planning, lenses: done, hover, status: await statusText() };
  });

  await step('show-report', async () => {
    const before = (await tabs()).length;
    await clickLens('^Show report$');
    const shown = await poll(tabs, (list) => list.length > before, config.analysisTimeoutMs);
    const report = await webviewReport();
    return { tabs: shown, report };
  });
} catch (error) {
  results.fatal = String(error?.message ?? error);
} finally {
  results.consoleErrors = consoleErrors;
  save();
  await ui.close();
}
