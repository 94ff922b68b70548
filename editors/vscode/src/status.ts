/**
 * The status bar item: the analysis state of the current file, from `torchscan/status`
 * notifications, or the server's own state when it is not running. A click opens the log.
 */
import * as vscode from 'vscode';

export type AnalysisState = 'running' | 'done' | 'stale' | 'failed' | 'untrusted' | 'idle';

/** Parameters of the `torchscan/status` notification. */
export interface StatusParams {
  readonly uri: string;
  readonly state: AnalysisState;
  readonly message: string;
}

export interface Presentation {
  readonly text: string;
  readonly tooltip: string;
  readonly error: boolean;
}

const ICONS: Record<AnalysisState, string> = {
  running: '$(sync~spin)',
  done: '$(check)',
  stale: '$(history)',
  failed: '$(error)',
  untrusted: '$(shield)',
  idle: '$(circle-outline)',
};

/** Text and tooltip for one document's state. */
export function presentStatus(status: StatusParams): Presentation {
  const label = `${ICONS[status.state] ?? ''} torchscan: ${status.state}`.trim();
  const tooltip = status.message ? `${status.message}\nClick to open the log.` : 'Click to open the log.';
  return { text: label, tooltip, error: status.state === 'failed' };
}

export class StatusBar implements vscode.Disposable {
  private readonly states = new Map<string, StatusParams>();
  private serverProblem: string | undefined;
  private activeUri: string | undefined;

  constructor(private readonly item: vscode.StatusBarItem, command: string) {
    item.command = command;
    item.name = 'torchscan-lsp';
  }

  /** Records a `torchscan/status` notification. */
  update(status: StatusParams): void {
    this.states.set(status.uri, status);
    this.render();
  }

  /** Follows the active editor; the item shows only for documents the server reported on. */
  setActive(uri: string | undefined): void {
    this.activeUri = uri;
    this.render();
  }

  /** Shows a server-level problem (not started, exited) for every document until cleared. */
  setServerProblem(problem: string | undefined): void {
    this.serverProblem = problem;
    this.render();
  }

  /** Forgets document states, after a restart. */
  clear(): void {
    this.states.clear();
    this.render();
  }

  dispose(): void {
    this.item.dispose();
  }

  private render(): void {
    if (this.serverProblem !== undefined) {
      this.show({ text: '$(error) torchscan: stopped', tooltip: `${this.serverProblem}\nClick to open the log.`, error: true });
      return;
    }
    const status = this.activeUri === undefined ? undefined : this.states.get(this.activeUri);
    if (status === undefined) {
      this.item.hide();
      return;
    }
    this.show(presentStatus(status));
  }

  private show(presentation: Presentation): void {
    this.item.text = presentation.text;
    this.item.tooltip = presentation.tooltip;
    this.item.backgroundColor = presentation.error
      ? new vscode.ThemeColor('statusBarItem.errorBackground')
      : undefined;
    this.item.show();
  }
}
