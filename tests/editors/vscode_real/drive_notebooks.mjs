// Drives code-server on a workspace holding Jupyter notebooks, as a user who opens one: the notebook
// editor (VS Code's built-in Jupyter serializer; no kernel, no Jupyter extension), the inlay hints on
// the lines of its cells, the hover of a layer in a cell, the Problems entry of the cell with a magic,
// then a notebook whose factory raises and its error in Problems. Writes what the page showed at each
// step (JSON) with screenshots; tests/editors/test_vscode_real_notebooks.py checks them.
//
// Usage: node drive_notebooks.mjs CONFIG.json, CONFIG holding what drive.mjs's does (url, folder,
// python, machineSettings, shots, results, profile, chromium, chromePidFile, uiTimeoutMs,
// analysisTimeoutMs) and notebook, broken (paths in the folder), cells (the code cells' lines, in
// order), expected: {cell (0-based): {line (0-based): label}}, hover: {cell, needle} (the text to
// hover in that cell).
import fs from 'node:fs';
import { open, plain } from './page.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
// The interpreter in code-server's Remote settings, where a remote window reads it.
fs.writeFileSync(config.machineSettings, JSON.stringify({ 'torchscan.python': config.python }, null, 1));
config.modelLines = [];
const ui = await open(config);
const { page, results, save, consoleErrors, poll, step, problems, hoverText, chord, quickOpen, showProblems } = ui;

// The notebook editor is an overlay over the editor area (`.notebookOverlay`), outside the editor
// group's DOM; the overlay of a notebook in a hidden tab stays in the page, hidden. Each code cell
// is a list row (`.code-cell-row`, numbered by `data-index` among all cells) holding its editor.
const CODE_CELLS = `() => [...document.querySelectorAll('.notebookOverlay')]
  .filter((overlay) => overlay.style.visibility !== 'hidden')
  .flatMap((overlay) => [...overlay.querySelectorAll('.monaco-list-row.code-cell-row')])
  .sort((a, b) => Number(a.dataset.index) - Number(b.dataset.index))`;

/** The rendered lines of each code cell of the notebook shown, in the cells' order (the notebook
 * is short: every cell is on screen). */
const cellLines = () =>
  page.evaluate(`(${CODE_CELLS})().map((row) =>
    [...row.querySelectorAll('.cell-editor-container .view-line')]
      .map((line) => ({ top: parseFloat(line.style.top), text: line.innerText }))
      .sort((a, b) => a.top - b.top)
      .map((line) => line.text))`);

/** The code lens titles of each code cell, in the cells' order. */
const cellLenses = () =>
  page.evaluate(`(${CODE_CELLS})().map((row) =>
    [...row.querySelectorAll('.codelens-decoration a')].map((a) => a.textContent.replace(/\u00a0/g, ' ')))`);

/** The inlay hints by 0-based cell and line: a rendered line's text after its source text. */
async function cellHints() {
  const found = {};
  (await cellLines()).forEach((lines, cell) => {
    lines.forEach((text, index) => {
      const source = config.cells[cell]?.[index] ?? '';
      const shown = plain(text);
      const extra = shown.startsWith(source) ? shown.slice(source.length).trim() : `(line shows ${JSON.stringify(shown)})`;
      if (extra) {
        (found[cell] ??= {})[index] = extra;
      }
    });
  });
  return found;
}

const matches = (expected) => (seen) =>
  Object.entries(expected).every(([cell, lines]) => Object.entries(lines).every(([line, label]) => seen[cell]?.[line] === label));

try {
  await step(
    'notebook-hints',
    async () => {
      const url = `${config.url}?folder=${encodeURIComponent(config.folder)}`;
      await page.goto(url, { waitUntil: 'domcontentloaded', timeout: config.analysisTimeoutMs });
      await page.waitForSelector('.monaco-workbench', { timeout: config.analysisTimeoutMs });
      await quickOpen(config.notebook);
      await page.waitForSelector('.notebook-editor .code-cell-row', { timeout: config.analysisTimeoutMs });
      const hints = await poll(cellHints, matches(config.expected), config.analysisTimeoutMs);
      // the lens is asked for again once the analysis ends: wait past its "analysing…" title
      return { cells: (await cellLines()).length, hints, lenses: await poll(cellLenses, (found) => found.some((titles) => titles.length > 0 && !/analysing/.test(titles[0]))) };
    },
    { fatal: true },
  );

  await step('hover', async () => {
    // Cursor in the layer's name inside the cell, then "Show or Focus Hover" (Ctrl+K Ctrl+I).
    const { cell, needle } = config.hover;
    const point = await page.evaluate(`(() => {
      const span = [...(${CODE_CELLS})()[${cell}].querySelectorAll('.cell-editor-container .view-line span span')]
        .find((s) => s.textContent.includes(${JSON.stringify(needle)}));
      const box = span.getBoundingClientRect();
      return { x: box.left + Math.min(box.width - 2, 12), y: box.top + box.height / 2 };
    })()`);
    await page.mouse.click(point.x, point.y);
    await chord('Control', 'KeyK');
    await chord('Control', 'KeyI');
    return { hover: await poll(hoverText, (shown) => shown.includes('Parameters:')) };
  });

  await step('problems', async () => {
    await page.keyboard.press('Escape'); // the hover
    await showProblems();
    return { problems: await poll(problems, (rows) => rows.some((row) => row.includes('IPython syntax left out'))) };
  });

  await step('broken-problems', async () => {
    await quickOpen(config.broken);
    await showProblems();
    const rows = await poll(problems, (list) => list.some((row) => row.startsWith('Error: ')), config.analysisTimeoutMs);
    return { problems: rows };
  });
} catch (error) {
  results.fatal = String(error?.message ?? error);
} finally {
  results.consoleErrors = consoleErrors;
  save();
  await ui.close();
}
