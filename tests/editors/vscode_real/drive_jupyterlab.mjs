// Drives JupyterLab 4 with jupyterlab-lsp in headless Chromium for tests/editors/test_jupyterlab_real.py
// (it shares this folder's puppeteer-core and page.mjs with the VS Code drivers). Config (a JSON
// file, argv[2]): url (the notebook's /lab/tree/ URL with its token), shots, results, profile,
// chromium, chromePidFile, uiTimeoutMs, analysisTimeoutMs, cells (how many the notebook has), hover: {needle, at} (the cell text to
// hover with Ctrl held, jupyterlab-lsp's hover gesture, and the offset in it of the character to
// hover). Steps: the notebook's cells render; the information jupyterlab-lsp underlines (its
// underlined text, its cell, and the message of its lint tooltip); the hover of the layer.
import fs from 'node:fs';
import { open, sleep } from './page.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const { browser, page, results, save, consoleErrors, poll, step } = await open(config);

/** The centre of the `at`-th character of the first cell line holding `needle`, and its cell. */
const characterBox = (needle, at) =>
  page.evaluate(
    (wanted, offset) => {
      const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
      for (const [index, cell] of cells.entries()) {
        for (const line of cell.querySelectorAll('.cm-line')) {
          const start = line.textContent.indexOf(wanted);
          if (start < 0) {
            continue;
          }
          const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
          let seen = 0;
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const inNode = start + offset - seen;
            if (inNode >= 0 && inNode < node.length) {
              const range = document.createRange();
              range.setStart(node, inNode);
              range.setEnd(node, inNode + 1);
              const box = range.getBoundingClientRect();
              return { cell: index, x: box.x + box.width / 2, y: box.y + box.height / 2 };
            }
            seen += node.length;
          }
        }
      }
      return null;
    },
    needle,
    at,
  );

/** The text of each information underline and the 0-based cell it is in. */
const underlines = () =>
  page.evaluate(() =>
    [...document.querySelectorAll('.jp-Notebook .jp-Cell')].flatMap((cell, index) =>
      [...cell.querySelectorAll('.cm-lintRange-info')].map((range) => ({ cell: index, text: range.textContent })),
    ),
  );

const tooltip = (selector) =>
  page.evaluate((wanted) => [...document.querySelectorAll(wanted)].map((node) => node.innerText).join('\n'), selector);

try {
  await step(
    'notebook',
    async () => {
      await page.goto(config.url, { waitUntil: 'domcontentloaded', timeout: config.uiTimeoutMs * 3 });
      await page.waitForSelector('.jp-Notebook .jp-Cell .cm-line', { timeout: config.uiTimeoutMs * 3 });
      // the cells render one after the other
      const count = () => page.evaluate(() => document.querySelectorAll('.jp-Notebook .jp-Cell .cm-content').length);
      return { cells: await poll(count, (cells) => cells >= config.cells) };
    },
    { fatal: true },
  );

  await step('information', async () => {
    // the scan's information comes with the server's first diagnostics, before any analysis ends
    const shown = await poll(underlines, (found) => found.length > 0, config.analysisTimeoutMs);
    if (!shown.length) {
      throw new Error('no information underlined');
    }
    const first = await page.evaluate(() => {
      const box = document.querySelector('.jp-Notebook .cm-lintRange-info').getBoundingClientRect();
      return { x: box.x + Math.min(8, box.width / 2), y: box.y + box.height / 2 };
    });
    const message = await poll(
      async () => {
        await page.mouse.move(5, 5);
        await page.mouse.move(first.x, first.y);
        await sleep(800); // CodeMirror shows a hover tooltip once the pointer rests
        return tooltip('.cm-tooltip-lint');
      },
      (text) => text.trim().length > 0,
    );
    await page.mouse.move(5, 5);
    return { underlines: shown, message };
  });

  await step('hover', async () => {
    // two characters of one name: jupyterlab-lsp asks again only for another character than the last
    const boxes = [await characterBox(config.hover.needle, config.hover.at),
                   await characterBox(config.hover.needle, config.hover.at + 1)];
    if (!boxes[0] || !boxes[1]) {
      throw new Error(`no cell line holds ${config.hover.needle}`);
    }
    let tries = 0;
    // the layer's numbers arrive with the analysis: hover again until they are there
    const text = await poll(
      async () => {
        const box = boxes[tries++ % 2];
        await page.mouse.move(5, 5);
        await page.keyboard.down('Control');
        await page.mouse.move(box.x, box.y);
        await sleep(500);
        const shown = await tooltip('.lsp-hover');
        await page.keyboard.up('Control');
        return shown;
      },
      (shown) => shown.includes('Parameters:'),
      config.analysisTimeoutMs,
    );
    return { cell: boxes[0].cell, hover: text, tries };
  });
} catch (error) {
  results.fatal = String(error?.stack ?? error);
}
results.consoleErrors = consoleErrors;
save();
await browser.close();
