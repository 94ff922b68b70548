// Drives code-server on a git workspace whose model is committed, as a user who changes the model:
// the hints as committed, then a widened layer saved (the hints carry their deltas, a code lens
// "Compare with HEAD" names them), the lens clicked (the HTML diff in an editor tab), and the edit
// reverted and saved (no delta). Writes what the page showed at each step (JSON) with screenshots;
// tests/editors/test_vscode_real_deltas.py checks them.
//
// Usage: node drive_deltas.mjs CONFIG.json, CONFIG holding what drive.mjs's does (url, folder, model,
// modelLines, python, machineSettings, shots, results, profile, chromium, chromePidFile,
// uiTimeoutMs, analysisTimeoutMs) and expected: {committed, widened, reverted} ({line: label} each),
// edit: {line (0-based), widened, reverted} (the line's text after each edit), lens (the lens title
// expected after the widening).
import fs from 'node:fs';
import { open } from './page.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
// The interpreter in code-server's Remote settings, where a remote window reads it.
fs.writeFileSync(config.machineSettings, JSON.stringify({ 'torchscan.python': config.python }, null, 1));
const ui = await open(config);
const { page, results, save, consoleErrors, poll, step, statusText, lenses, hints, chord, quickOpen } = ui;
const { clickLens, tabs, webviewReport } = ui;

const matches = (expected) => (seen) => Object.entries(expected).every(([line, label]) => seen[line] === label);

/** Replaces the text of 0-based `line` (after its indentation) as a user types it, then saves. */
async function retype(line, text) {
  await chord('Control', 'KeyG');
  await page.waitForSelector('.quick-input-widget input', { visible: true, timeout: config.uiTimeoutMs });
  await page.keyboard.type(String(line + 1));
  await page.keyboard.press('Enter');
  await page.keyboard.press('End');
  await chord('Shift', 'Home'); // to the first non-blank character
  await page.keyboard.type(text.trimStart());
  await chord('Control', 'KeyS');
}

/** Waits for the hints of one edit; the rendered lines follow the edited text. */
async function settle(expected, lines) {
  config.modelLines = lines;
  return poll(hints, matches(expected), config.analysisTimeoutMs);
}

try {
  await step(
    'committed',
    async () => {
      // (a machine under load takes its time to serve the workbench)
      const url = `${config.url}?folder=${encodeURIComponent(config.folder)}`;
      await page.goto(url, { waitUntil: 'domcontentloaded', timeout: config.analysisTimeoutMs });
      await page.waitForSelector('.monaco-workbench', { timeout: config.analysisTimeoutMs });
      await quickOpen(config.model);
      const status = await poll(statusText, (text) => text === 'torchscan: done', config.analysisTimeoutMs);
      return { status, hints: await settle(config.expected.committed, config.modelLines), lenses: await lenses() };
    },
    { fatal: true },
  );

  const widenedLines = [...config.modelLines];
  widenedLines[config.edit.line] = config.edit.widened;
  await step('widened', async () => {
    await retype(config.edit.line, config.edit.widened);
    const shown = await settle(config.expected.widened, widenedLines);
    const titles = await poll(lenses, (list) => list.includes(config.lens), config.analysisTimeoutMs);
    return { hints: shown, lenses: titles };
  });

  await step('compare-with-head', async () => {
    const before = (await tabs()).length;
    await clickLens('^Compare with HEAD');
    const shown = await poll(tabs, (list) => list.length > before, config.analysisTimeoutMs);
    return { tabs: shown, report: await webviewReport() };
  });

  const revertedLines = [...widenedLines];
  revertedLines[config.edit.line] = config.edit.reverted;
  await step('reverted', async () => {
    await quickOpen(config.model);
    await retype(config.edit.line, config.edit.reverted);
    const shown = await settle(config.expected.reverted, revertedLines);
    return { hints: shown, lenses: await poll(lenses, (list) => !list.some((title) => title.startsWith('Compare with HEAD: +'))) };
  });
} catch (error) {
  results.fatal = String(error?.message ?? error);
} finally {
  results.consoleErrors = consoleErrors;
  save();
  await ui.close();
}
