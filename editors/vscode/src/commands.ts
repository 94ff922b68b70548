/**
 * The palette commands. The server's own commands (`torchscan.reanalyze`, ...) are registered by
 * the language client from the server's capabilities and run by code lenses; these wrap them for
 * the current file and add the client-side ones (restart, log).
 */
import * as vscode from 'vscode';
import type { CodeLens } from 'vscode-languageclient/node';
import { SERVER_COMMANDS } from './launch';
import { ServerSession } from './session';

/** Palette command identifiers (contributed in package.json). */
export const CLIENT_COMMANDS = {
  reanalyze: 'torchscan-lsp.reanalyze',
  showReport: 'torchscan-lsp.showReport',
  measureLatency: 'torchscan-lsp.measureLatency',
  measureMemory: 'torchscan-lsp.measureMemory',
  measureTraining: 'torchscan-lsp.measureTraining',
  planTraining: 'torchscan-lsp.planTraining',
  restart: 'torchscan-lsp.restart',
  showLog: 'torchscan-lsp.showLog',
} as const;

const SERVER_COMMAND_NAMES = new Set<string>(Object.values(SERVER_COMMANDS));

/** The analysis targets a file's code lenses name (their commands take `uri, target, ...`). */
export function targetsFromCodeLenses(lenses: readonly CodeLens[] | null): string[] {
  const targets = new Set<string>();
  for (const lens of lenses ?? []) {
    const args = lens.command?.arguments;
    if (lens.command && SERVER_COMMAND_NAMES.has(lens.command.command) && typeof args?.[1] === 'string') {
      targets.add(args[1]);
    }
  }
  return [...targets];
}

function activePythonUri(): string | undefined {
  const document = vscode.window.activeTextEditor?.document;
  return document?.languageId === 'python' ? document.uri.toString() : undefined;
}

export function registerCommands(session: ServerSession, log: vscode.LogOutputChannel): vscode.Disposable[] {
  async function serverCommand(command: string, needsTarget: boolean, extra: unknown[] = []): Promise<void> {
    const client = session.running;
    if (client === undefined) {
      const choice = await vscode.window.showErrorMessage(
        'torchscan-lsp is not running. Open the log for the reason, or restart the server.',
        'Restart server',
        'Show log',
      );
      if (choice === 'Restart server') {
        await session.restart();
      } else if (choice === 'Show log') {
        log.show();
      }
      return;
    }
    const uri = activePythonUri();
    if (uri === undefined) {
      void vscode.window.showInformationMessage('torchscan-lsp: open a Python file with an analysis target first.');
      return;
    }
    const args: unknown[] = [uri];
    if (needsTarget) {
      const lenses = await client.sendRequest<CodeLens[] | null>('textDocument/codeLens', { textDocument: { uri } });
      const targets = targetsFromCodeLenses(lenses);
      const target =
        targets.length <= 1 ? targets[0] : await vscode.window.showQuickPick(targets, { title: 'Analysis target' });
      if (target === undefined) {
        if (targets.length === 0) {
          void vscode.window.showInformationMessage(
            'torchscan-lsp: this file has no analysis target. Mark a model factory with a "# torchscan: input_shape=(...)" comment.',
          );
        }
        return;
      }
      args.push(target, ...extra);
    }
    try {
      await client.sendRequest('workspace/executeCommand', { command, arguments: args });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      log.error(`${command} failed: ${message}`);
      void vscode.window.showErrorMessage(`torchscan-lsp: ${command} failed: ${message}`);
    }
  }

  return [
    vscode.commands.registerCommand(CLIENT_COMMANDS.reanalyze, () => serverCommand(SERVER_COMMANDS.reanalyze, false)),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showReport, () =>
      serverCommand(SERVER_COMMANDS.showReport, true, ['html']),
    ),
    vscode.commands.registerCommand(CLIENT_COMMANDS.measureLatency, () =>
      serverCommand(SERVER_COMMANDS.measureLatency, true),
    ),
    vscode.commands.registerCommand(CLIENT_COMMANDS.measureMemory, () =>
      serverCommand(SERVER_COMMANDS.measureMemory, true),
    ),
    vscode.commands.registerCommand(CLIENT_COMMANDS.measureTraining, () =>
      serverCommand(SERVER_COMMANDS.measureTraining, true),
    ),
    vscode.commands.registerCommand(CLIENT_COMMANDS.planTraining, () =>
      serverCommand(SERVER_COMMANDS.planTraining, true),
    ),
    vscode.commands.registerCommand(CLIENT_COMMANDS.restart, () => session.restart()),
    vscode.commands.registerCommand(CLIENT_COMMANDS.showLog, () => log.show()),
  ];
}
