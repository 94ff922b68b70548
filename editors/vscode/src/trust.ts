/**
 * The workspace trust rule: the server may run workspace code only in a trusted workspace, and an
 * interpreter that lives inside an untrusted workspace is itself workspace code.
 */
import * as path from 'node:path';
import * as vscode from 'vscode';

/**
 * What the server is told at start: `trusted: true` allows it to run workspace code, and `editor`
 * names VS Code (whatever the application calls itself: Visual Studio Code, code-server,
 * VSCodium…), so that its messages give the advice that works here: trust the workspace.
 */
export interface InitializationOptions {
  readonly trusted: boolean;
  readonly editor: 'vscode';
}

export function initializationOptions(trusted: boolean): InitializationOptions {
  return { trusted, editor: 'vscode' };
}

/** The options for the current window's trust state. */
export function currentInitializationOptions(): InitializationOptions {
  return initializationOptions(vscode.workspace.isTrusted);
}

/** VS Code's command that opens the workspace trust editor. */
export const MANAGE_TRUST_COMMAND = 'workbench.trust.manage';

/**
 * The code lenses shown in Restricted Mode. The server then offers only each target's summary
 * ("not analysed (untrusted workspace)"), whose own command would ask the server for an analysis
 * it refuses; here it opens the trust editor instead, which is what the user needs to do.
 */
export function restrictedModeLenses(
  lenses: vscode.CodeLens[] | null | undefined,
  trusted: boolean,
): vscode.CodeLens[] | null | undefined {
  if (trusted || !lenses) {
    return lenses;
  }
  return lenses.map(
    (lens) =>
      new vscode.CodeLens(lens.range, {
        title: lens.command?.title ?? 'torchscan: not analysed (untrusted workspace)',
        command: MANAGE_TRUST_COMMAND,
        tooltip: 'Trust this workspace to let torchscan-lsp run its model code',
      }),
  );
}

export const UNTRUSTED_EXPLANATION =
  'This workspace is not trusted, so torchscan-lsp does not run its model code and shows no costs. ' +
  'Trust the workspace (Workspaces: Manage Workspace Trust) to enable the analysis.';

/** Whether `file` lies inside one of `folders` (absolute paths). */
export function isInsideAny(file: string, folders: readonly string[]): boolean {
  const resolved = path.resolve(file);
  return folders.some((folder) => {
    const relative = path.relative(path.resolve(folder), resolved);
    return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
  });
}

/**
 * Whether an interpreter may be started: always in a trusted workspace; in an untrusted one only
 * when it lies outside every workspace folder (a virtual environment checked into the workspace
 * could run anything).
 */
export function interpreterAllowed(
  interpreter: string,
  trusted: boolean,
  workspaceFolders: readonly string[],
): boolean {
  if (trusted || !path.isAbsolute(interpreter)) {
    return true;
  }
  return !isInsideAny(interpreter, workspaceFolders);
}
