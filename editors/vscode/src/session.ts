/**
 * The language client's life cycle: choose and check the interpreter, start the server, restart
 * it on demand, and turn every way it can fail into one clear message with the fix.
 */
import { spawn } from 'node:child_process';
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
import { configurationItem } from './settings';
import { StatusBar, StatusParams } from './status';
import { currentInitializationOptions } from './trust';

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

/** How the server process ended, kept to explain a failed start. */
interface ExitRecord {
  code: number | null;
  stderr: string[];
}

export class ServerSession implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private queue: Promise<void> = Promise.resolve();
  private crashes = 0;

  constructor(
    private readonly log: vscode.LogOutputChannel,
    private readonly status: StatusBar,
    private readonly pythonApi: () => Promise<PythonEnvironmentsApi | undefined>,
  ) {}

  /** The running client, or `undefined` when the server is not running. */
  get running(): LanguageClient | undefined {
    return this.client?.state === State.Running ? this.client : undefined;
  }

  /** Starts the server (after any pending start or stop). */
  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  /** Stops and starts the server, e.g. after a settings, interpreter or trust change. */
  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.doStop();
      this.crashes = 0;
      await this.doStart();
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

  private async doStart(): Promise<void> {
    this.status.clear();
    const resource = vscode.window.activeTextEditor?.document.uri;
    const interpreter = await selectInterpreter(await this.pythonApi(), resource);
    for (const reason of interpreter.skipped) {
      this.log.warn(`Interpreter skipped: ${reason}`);
    }
    this.log.info(`Interpreter: ${interpreter.command} (from ${interpreter.source})`);
    const probe = await probeInterpreter(interpreter.command);
    if (!probe.ok) {
      this.fail(describeProbeFailure(interpreter.command, probe), interpreter.command, probe.problem);
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
    this.client = undefined;
    if (client !== undefined && client.state !== State.Stopped) {
      try {
        await client.stop(3000);
      } catch (error) {
        this.log.warn(`Stopping the server failed: ${String(error)}`);
      }
    }
  }

  private serverOptions(python: string, exit: ExitRecord): ServerOptions {
    const launch = serverLaunch(python);
    return async () => {
      const child = spawn(launch.command, launch.args, { env: process.env });
      // stderr is the server's log; the last lines also explain an exit at start.
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (chunk: string) => {
        for (const line of chunk.split(/\r?\n/).filter((text) => text.trim() !== '')) {
          this.log.info(`[server] ${line}`);
          exit.stderr.push(line);
          exit.stderr.splice(0, Math.max(0, exit.stderr.length - STDERR_LINES));
        }
      });
      child.on('exit', (code) => {
        exit.code = code;
        this.log.info(`Server process exited with code ${String(code)}`);
      });
      return child;
    };
  }

  private clientOptions(): LanguageClientOptions {
    return {
      documentSelector: [
        { scheme: 'file', language: 'python' },
        { scheme: 'untitled', language: 'python' },
      ],
      outputChannel: this.log,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: currentInitializationOptions(),
      initializationFailedHandler: () => false,
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue, handled: true }),
        closed: () => this.onClosed(),
      },
      middleware: {
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

  private fail(message: string, python: string | undefined, problem: string): void {
    this.log.error(message);
    this.status.setServerProblem(message);
    const actions =
      problem === 'no-interpreter'
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
