import { afterEach, describe, expect, test, vi } from 'vitest';
import * as vscode from 'vscode';
import { ReportPanels, reportTitle, showsInWebview, WindowPlace } from '../src/reportView';

vi.mock('vscode');

// jest-mock-vscode has no UIKind; these are VS Code's values.
const UIKind = { Desktop: 1, Web: 2 } as const;
(vscode as unknown as { UIKind: typeof UIKind }).UIKind = UIKind;

const REPORT = 'file:///home/me/.cache/torchscan-lsp/reports/w-1234/models_model.py-build.html';
const HTML =
  '<!doctype html><html><head><meta http-equiv="Content-Security-Policy" content="default-src \'none\'">' +
  '<title>build · models/model.py</title></head><body>Conv2d</body></html>';

const local: WindowPlace = { remoteName: undefined, uiKind: UIKind.Desktop };
const browser: WindowPlace = { remoteName: '127.0.0.1:8080', uiKind: UIKind.Web };
const ssh: WindowPlace = { remoteName: 'ssh-remote', uiKind: UIKind.Desktop };

afterEach(() => {
  vi.restoreAllMocks();
});

describe('where the report opens', () => {
  test('a local desktop window opens it in the browser, as the server asks', () => {
    expect(showsInWebview({ uri: REPORT, external: true }, local)).toBe(false);
  });

  test('a browser window (code-server, VS Code for the Web) or a remote one shows it in a webview', () => {
    expect(showsInWebview({ uri: REPORT, external: true }, browser)).toBe(true);
    expect(showsInWebview({ uri: REPORT, external: true }, ssh)).toBe(true);
  });

  test('the JSON report, opened as a document, is left to the client everywhere', () => {
    const json = REPORT.replace(/\.html$/, '.json');
    expect(showsInWebview({ uri: json }, browser)).toBe(false);
    expect(showsInWebview({ uri: json, external: false }, ssh)).toBe(false);
  });

  test("the tab is named by the page's title, else the file name", () => {
    expect(reportTitle(HTML, vscode.Uri.parse(REPORT))).toBe('build · models/model.py');
    expect(reportTitle('<p>no title</p>', vscode.Uri.parse(REPORT))).toBe('models_model.py-build.html');
  });
});

describe('the webview', () => {
  function panels() {
    const log = { info: vi.fn(), error: vi.fn() };
    return { reports: new ReportPanels(log as unknown as vscode.LogOutputChannel), log };
  }

  test('holds the HTML as written, runs no script and loads no file', async () => {
    vi.spyOn(vscode.workspace.fs, 'readFile').mockResolvedValue(new TextEncoder().encode(HTML));
    const webview = { html: '' };
    const panel = { webview, onDidDispose: vi.fn(), reveal: vi.fn(), dispose: vi.fn(), title: '' };
    const create = vi.spyOn(vscode.window, 'createWebviewPanel').mockReturnValue(panel as never);
    const { reports } = panels();
    const next = vi.fn();
    const answer = await reports.middleware(() => browser)({ uri: REPORT, external: true }, next);
    expect(answer).toEqual({ success: true });
    expect(next).not.toHaveBeenCalled();
    // the page keeps its own content security policy, which forbids every fetch
    expect(webview.html).toBe(HTML);
    const [, title, , options] = create.mock.calls[0];
    expect(title).toBe('build · models/model.py');
    expect(options).toMatchObject({ enableScripts: false, localResourceRoots: [] });

    // shown again: the same tab, refreshed
    await reports.show(vscode.Uri.parse(REPORT));
    expect(create).toHaveBeenCalledOnce();
    expect(panel.reveal).toHaveBeenCalledOnce();
  });

  test('a report that cannot be read is said aloud, and the server is told it was not shown', async () => {
    vi.spyOn(vscode.workspace.fs, 'readFile').mockRejectedValue(new Error('ENOENT: no such file'));
    const { reports, log } = panels();
    const answer = await reports.middleware(() => ssh)({ uri: REPORT, external: true }, vi.fn());
    expect(answer).toEqual({ success: false });
    expect(vscode.window.showErrorMessage).toHaveBeenCalledWith(expect.stringContaining('ENOENT: no such file'));
    expect(log.error).toHaveBeenCalledOnce();
  });
});
