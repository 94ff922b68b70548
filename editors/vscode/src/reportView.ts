/**
 * "Show report" wherever the extension runs. The server writes the HTML report next to itself and
 * asks the client (`window/showDocument`, `external: true`) to open its `file://` URI in a browser.
 * That works in a local desktop window only: in VS Code for the Web, code-server or a remote
 * window the file lies on another machine than the browser, which blocks the request without a
 * word. There the report is shown in an editor tab instead (a webview), with the same offline HTML:
 * its own content security policy forbids every fetch, and the webview runs no script.
 */
import * as vscode from 'vscode';
import type { ShowDocumentParams, ShowDocumentResult, WindowMiddleware } from 'vscode-languageclient/node';

type ShowDocumentMiddleware = NonNullable<WindowMiddleware['showDocument']>;

/** Where the window runs, as far as opening the server's files goes. */
export interface WindowPlace {
  /** `vscode.env.remoteName`: `ssh-remote`, `wsl`, a code-server host…; undefined in a local window. */
  readonly remoteName: string | undefined;
  readonly uiKind: vscode.UIKind;
}

export function currentPlace(): WindowPlace {
  return { remoteName: vscode.env.remoteName, uiKind: vscode.env.uiKind };
}

/** Whether the browser that opens external links runs on the machine of the extension host. */
export function opensServerFilesExternally(place: WindowPlace): boolean {
  return place.remoteName === undefined && place.uiKind === vscode.UIKind.Desktop;
}

/** Whether a `window/showDocument` request must be shown in a webview rather than passed on. */
export function showsInWebview(params: ShowDocumentParams, place: WindowPlace): boolean {
  return (
    params.external === true &&
    params.uri.startsWith('file:') &&
    /\.html?$/i.test(params.uri) &&
    !opensServerFilesExternally(place)
  );
}

/** The page's `<title>`, else the file's name. */
export function reportTitle(html: string, uri: vscode.Uri): string {
  const title = /<title>([^<]*)<\/title>/i.exec(html)?.[1]?.trim();
  return title || uri.path.split('/').pop() || 'torchscan report';
}

/** One webview tab per report file, reused (and refreshed) when the report is shown again. */
export class ReportPanels implements vscode.Disposable {
  private readonly panels = new Map<string, vscode.WebviewPanel>();

  constructor(private readonly log: vscode.LogOutputChannel) {}

  /** Shows the HTML file at `uri` (readable by the extension host); false, said aloud, when it cannot. */
  async show(uri: vscode.Uri): Promise<boolean> {
    let html: string;
    try {
      html = new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
    } catch (error) {
      const message = `torchscan-lsp: could not open the report ${uri.fsPath}: ${error instanceof Error ? error.message : String(error)}`;
      this.log.error(message);
      void vscode.window.showErrorMessage(message);
      return false;
    }
    const key = uri.toString();
    let panel = this.panels.get(key);
    if (panel === undefined) {
      panel = vscode.window.createWebviewPanel(
        'torchscan-lsp.report',
        reportTitle(html, uri),
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: false },
        // The page is static: no script, and no file of the machine may be loaded into it.
        { enableScripts: false, enableFindWidget: true, localResourceRoots: [] },
      );
      panel.onDidDispose(() => this.panels.delete(key));
      this.panels.set(key, panel);
    } else {
      panel.title = reportTitle(html, uri);
      panel.reveal(undefined, false);
    }
    panel.webview.html = html;
    this.log.info(`Report shown in the editor (this window cannot open ${uri.fsPath} in a browser)`);
    return true;
  }

  /** The `window.showDocument` middleware of the language client. */
  middleware(place: () => WindowPlace = currentPlace): ShowDocumentMiddleware {
    return async (params, next) => {
      if (!showsInWebview(params, place())) {
        // The client's own handler answers with a promise (its signature allows a plain value).
        return (await next(params, new vscode.CancellationTokenSource().token)) as ShowDocumentResult;
      }
      return { success: await this.show(vscode.Uri.parse(params.uri)) };
    };
  }

  dispose(): void {
    for (const panel of this.panels.values()) {
      panel.dispose();
    }
    this.panels.clear();
  }
}
