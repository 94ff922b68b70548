/**
 * The language client's life cycle: choose and check the interpreter, start the server, restart
 * it on demand, and turn every way it can fail into one clear message with the fix.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import * as vscode from 'vscode';
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  State,
} from 'vscode-languageclient/node';
import { selectInterpreter } from './interpreter';
import { serverLaunch, STATUS_NOTIFICATION } from './launch';
import { describeProbeFailure, installCommand, probeInterpreter } from './probe';
import { PythonEnvironmentsApi } from './pythonExtension';
import { configurationItem, readServerSettings, SECTION } from './settings';
import { OPEN_REMOTE_SETTINGS, settingOrigin } from './settingsPlace';
import { StatusBar, StatusParams } from './status';
import { ReportPanels } from './reportView';
import { currentInitializationOptions, restrictedModeLenses } from './trust';

/**
 * The documents the client hands the server: Python files, unsaved Python editors and the Python
 * cells of Jupyter notebooks. A cell's document has the `vscode-notebook-cell` scheme, so the file
 * filters miss it; the notebook filter makes hints, hovers and lenses reach cells, and the client
 * syncs the notebooks themselves through LSP 3.17 notebook messages, which the server registers.
 */
export const DOCUMENT_SELECTOR = [
  { scheme: 'file', language: 'python' },
  { scheme: 'untitled', language: 'python' },
  { notebook: 'jupyter-notebook', language: 'python' },
];

/** Crashes of a running server that are restarted before the session gives up. */
const MAX_RESTARTS = 3;
/** Lines of the server's stderr kept to explain an exit. */
const STDERR_LINES = 20;

/**
 * vscode-languageclient pops up a generic "couldn't create connection" notification on failures.
 * The session reports each failure itself, naming the problem and the fix, so these go to the log.
 */
class QuietLanguageClient extends LanguageClient {
  override error(message: string, data?: unknown): void {
    super.error(message, data, false);
  }
}

/** How long a stopped client's server process gets to exit on its own before it is killed, ms. */
const EXIT_GRACE_MS = 2000;

/** How the server process ended, kept to explain a failed start. */
interface ExitRecord {
  code: number | null;
  stderr: string[];
}

export class ServerSession implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private child: ChildProcess | undefined;
  /** The settings of the last start (see restartForSettings). */
  private startedWith: string | undefined;
  private queue: Promise<void> = Promise.resolve();
  private crashes = 0;

  constructor(
    private readonly log: vscode.LogOutputChannel,
    private readonly status: StatusBar,
    private readonly pythonApi: () => Promise<PythonEnvironmentsApi | undefined>,
    private readonly reports: ReportPanels,
  ) {}

  /** The running client, or `undefined` when the server is not running. */
  get running(): LanguageClient | undefined {
    return this.client?.state === State.Running ? this.client : undefined;
  }

  /** Starts the server (after any pending start or stop). */
  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  /** Stops and starts the server, e.g. after an interpreter or trust change. */
  restart(): Promise<void> {
    return this.enqueue(() => this.doRestart());
  }

  /**
   * Restarts after a `torchscan` settings event, unless the settings the server would get are
   * those it started with: VS Code also fires the event when nothing the server reads changed
   * (granting trust does, right after the trust restart).
   */
  restartForSettings(): Promise<void> {
    return this.enqueue(async () => {
      if (this.startedWith === undefined || settingsKey() !== this.startedWith) {
        await this.doRestart();
      }
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  dispose(): void {
    void this.stop();
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    // Starts and stops run one at a time: two overlapping restarts would start two servers.
    this.queue = this.queue.then(step, step);
    return this.queue;
  }

  private async doRestart(): Promise<void> {
    await this.doStop();
    this.crashes = 0;
    await this.doStart();
  }

  private async doStart(): Promise<void> {
    this.status.clear();
    this.startedWith = settingsKey();
    const resource = vscode.window.activeTextEditor?.document.uri;
    const interpreter = await selectInterpreter(await this.pythonApi(), resource);
    for (const reason of interpreter.skipped) {
      this.log.warn(`Interpreter skipped: ${reason}`);
    }
    const remoteName = vscode.env.remoteName;
    const origin =
      interpreter.source === 'setting'
        ? settingOrigin(vscode.workspace.getConfiguration(SECTION, resource).inspect('python'), remoteName)
        : undefined;
    this.log.info(`Interpreter: ${interpreter.command} (from ${origin ? `torchscan.python in ${origin}` : interpreter.source})`);
    const probe = await probeInterpreter(interpreter.command);
    if (!probe.ok) {
      const context = { source: interpreter.source, remoteName };
      // In a remote window the setting the user needs is that machine's, not their local one.
      const remoteFix = remoteName !== undefined && interpreter.source !== 'setting' && probe.problem !== 'broken';
      this.fail(describeProbeFailure(interpreter.command, probe, context), interpreter.command, probe.problem, remoteFix);
      return;
    }
    this.log.info(`torchscan-lsp ${probe.version} found`);
    if (!probe.torch) {
      this.warn(
        `torchscan-lsp: torch is not installed in ${interpreter.command}, so every analysis will fail. ` +
          `Install it with "${interpreter.command} -m pip install torch".`,
      );
    }
    if (!vscode.workspace.isTrusted) {
      this.log.info('Workspace not trusted: the server will not run workspace code.');
    }
    const exit: ExitRecord = { code: null, stderr: [] };
    const client = new QuietLanguageClient(
      'torchscan',
      'torchscan-lsp',
      this.serverOptions(interpreter.command, exit),
      this.clientOptions(),
    );
    client.onNotification(STATUS_NOTIFICATION, (params: StatusParams) => this.status.update(params));
    this.client = client;
    try {
      await client.start();
      this.status.setServerProblem(undefined);
    } catch (error) {
      this.client = undefined;
      const reason = exit.stderr[exit.stderr.length - 1] ?? (error instanceof Error ? error.message : String(error));
      this.fail(
        `torchscan-lsp: the server exited at start${exit.code === null ? '' : ` (exit code ${exit.code})`}: ${reason}. ` +
          `Reinstall it with "${installCommand(interpreter.command)}"; the log has the full error.`,
        interpreter.command,
        'exited',
      );
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    const child = this.child;
    this.client = undefined;
    this.child = undefined;
    if (client !== undefined && client.state !== State.Stopped) {
      try {
        await client.stop(3000);
      } catch (error) {
        this.log.warn(`Stopping the server failed: ${String(error)}`);
      }
    }
    if (child !== undefined) {
      await endProcess(child, EXIT_GRACE_MS);
    }
  }

  private serverOptions(python: string, exit: ExitRecord): ServerOptions {
    const launch = serverLaunch(python);
    return async () => {
      const child = spawn(launch.command, launch.args, { env: process.env });
      this.child = child;
      // stderr is the server's log, written here once per line; the last lines also explain an
      // exit at start.
      createInterface({ input: child.stderr, crlfDelay: Infinity }).on('line', (line: string) => {
        if (line.trim() === '') {
          return;
        }
        this.log.info(`[server] ${line}`);
        exit.stderr.push(line);
        exit.stderr.splice(0, Math.max(0, exit.stderr.length - STDERR_LINES));
      });
      child.on('exit', (code) => {
        exit.code = code;
        this.log.info(`Server process exited with code ${String(code)}`);
      });
      // Streams, not the ChildProcess: given the process, vscode-languageclient copies its stderr
      // into the same output channel, and every line would show twice. The session ends the
      // process itself (see doStop).
      return { reader: child.stdout, writer: child.stdin };
    };
  }

  private clientOptions(): LanguageClientOptions {
    return {
      documentSelector: DOCUMENT_SELECTOR,
      outputChannel: this.log,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: currentInitializationOptions(),
      initializationFailedHandler: () => false,
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue, handled: true }),
        closed: () => this.onClosed(),
      },
      middleware: {
        // Where the browser cannot open the server's file, the HTML report opens in a webview.
        window: { showDocument: this.reports.middleware() },
        provideCodeLenses: async (document, token, next) =>
          restrictedModeLenses(await next(document, token), vscode.workspace.isTrusted),
        workspace: {
          // The server pulls its settings; answer with the validated, trust-aware mapping.
          configuration: async (params, token, next) => {
            const answer = await next(params, token);
            if (!Array.isArray(answer)) {
              return answer;
            }
            return params.items.map((item, index) => {
              const scope = item.scopeUri === undefined ? undefined : vscode.Uri.parse(item.scopeUri);
              return configurationItem(item.section, scope) ?? answer[index];
            });
          },
        },
      },
    };
  }

  private onClosed(): { action: CloseAction; handled: boolean } {
    if (this.client?.state !== State.Running) {
      // A start that failed: doStart reports it.
      return { action: CloseAction.DoNotRestart, handled: true };
    }
    this.crashes += 1;
    if (this.crashes <= MAX_RESTARTS) {
      this.log.warn(`The server stopped unexpectedly; restarting (${this.crashes}/${MAX_RESTARTS}).`);
      return { action: CloseAction.Restart, handled: true };
    }
    this.fail(
      `torchscan-lsp: the server stopped ${this.crashes} times and was not restarted again. ` +
        'Open the log for the error, then run "torchscan: Restart server".',
      undefined,
      'exited',
    );
    return { action: CloseAction.DoNotRestart, handled: true };
  }

  private warn(message: string): void {
    this.log.warn(message);
    void vscode.window.showWarningMessage(message);
  }

  private fail(message: string, python: string | undefined, problem: string, remoteFix = false): void {
    this.log.error(message);
    this.status.setServerProblem(message);
    const actions = remoteFix
      ? ['Open Remote Settings', ...(problem === 'no-package' ? ['Show install command'] : []), 'Show log']
      : problem === 'no-interpreter'
        ? ['Open settings', 'Show log']
        : python === undefined
          ? ['Restart server', 'Show log']
          : ['Show install command', 'Show log'];
    void vscode.window.showErrorMessage(message, ...actions).then(async (choice) => {
      if (choice === 'Show log') {
        this.log.show();
      } else if (choice === 'Restart server') {
        await this.restart();
      } else if (choice === 'Open settings') {
        await vscode.commands.executeCommand('workbench.action.openSettings', 'torchscan.python');
      } else if (choice === 'Open Remote Settings') {
        await vscode.commands.executeCommand(OPEN_REMOTE_SETTINGS);
      } else if (choice === 'Show install command' && python !== undefined) {
        const command = installCommand(python);
        const copy = await vscode.window.showInformationMessage(
          'Run this in a terminal, then "torchscan: Restart server":',
          { modal: true, detail: command },
          'Copy',
        );
        if (copy === 'Copy') {
          await vscode.env.clipboard.writeText(command);
        }
      }
    });
  }
}

/** The settings the server gets and the trust state, as one comparable string. */
function settingsKey(): string {
  const resource = vscode.window.activeTextEditor?.document.uri;
  return JSON.stringify([vscode.workspace.isTrusted, readServerSettings(resource).settings]);
}

/**
 * Waits up to `graceMs` for `child` to exit (the server exits after the client's `exit`
 * notification), then kills it.
 */
export async function endProcess(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const exited = await new Promise<boolean>((resolve) => {
    child.once('exit', () => resolve(true));
    timer = setTimeout(() => resolve(false), graceMs);
  });
  clearTimeout(timer);
  if (!exited) {
    child.kill();
  }
}
