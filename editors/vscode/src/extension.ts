/** Entry point: wires the log, status bar, commands and server session to VS Code's events. */
import * as vscode from 'vscode';
import { CLIENT_COMMANDS, registerCommands } from './commands';
import { pythonEnvironments } from './pythonExtension';
import { readServerSettings, SECTION } from './settings';
import { ServerSession } from './session';
import { StatusBar } from './status';
import { ReportPanels } from './reportView';
import { MANAGE_TRUST_COMMAND, UNTRUSTED_EXPLANATION } from './trust';

let session: ServerSession | undefined;

/** Shows each unusable setting once per change, with a way to the setting. */
function reportSettingProblems(log: vscode.LogOutputChannel): void {
  for (const problem of readServerSettings().problems) {
    log.warn(problem.message);
    void vscode.window.showWarningMessage(problem.message, 'Open settings').then((choice) => {
      if (choice === 'Open settings') {
        void vscode.commands.executeCommand('workbench.action.openSettings', problem.setting);
      }
    });
  }
}

function explainUntrusted(log: vscode.LogOutputChannel): void {
  log.info(UNTRUSTED_EXPLANATION);
  void vscode.window.showInformationMessage(UNTRUSTED_EXPLANATION, 'Manage workspace trust').then((choice) => {
    if (choice === 'Manage workspace trust') {
      void vscode.commands.executeCommand(MANAGE_TRUST_COMMAND);
    }
  });
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const log = vscode.window.createOutputChannel('torchscan-lsp', { log: true });
  const status = new StatusBar(
    vscode.window.createStatusBarItem('torchscan-lsp.status', vscode.StatusBarAlignment.Right, 100),
    CLIENT_COMMANDS.showLog,
  );
  const reports = new ReportPanels(log);
  const current = new ServerSession(log, status, pythonEnvironments, reports);
  session = current;
  context.subscriptions.push(log, status, reports, current, ...registerCommands(current, log));

  status.setActive(vscode.window.activeTextEditor?.document.uri.toString());
  context.subscriptions.push(
    vscode.window.onDidChangeActiveTextEditor((editor) => status.setActive(editor?.document.uri.toString())),
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      log.info('Workspace trusted: restarting the server so that it may run the analysis.');
      void current.restart();
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration(SECTION)) {
        reportSettingProblems(log);
        void current.restartForSettings();
      }
    }),
  );

  const pythonApi = await pythonEnvironments().catch(() => undefined);
  if (pythonApi !== undefined) {
    context.subscriptions.push(
      pythonApi.onDidChangeActiveEnvironmentPath(() => {
        if (readServerSettings().settings.python === null) {
          log.info('The Python extension changed the active environment: restarting the server.');
          void current.restart();
        }
      }),
    );
  }

  if (!vscode.workspace.isTrusted) {
    explainUntrusted(log);
  }
  reportSettingProblems(log);
  await current.start();
}

export async function deactivate(): Promise<void> {
  await session?.stop();
  session = undefined;
}
