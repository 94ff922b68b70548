/**
 * The workspace trust rule: the server may run workspace code only in a trusted workspace, and an
 * interpreter that lives inside an untrusted workspace is itself workspace code.
 */
import * as path from 'node:path';
import * as vscode from 'vscode';

/** What the server is told at start; `trusted: true` allows it to run workspace code. */
export interface InitializationOptions {
  readonly trusted: boolean;
}

export function initializationOptions(trusted: boolean): InitializationOptions {
  return { trusted };
}

/** The options for the current window's trust state. */
export function currentInitializationOptions(): InitializationOptions {
  return initializationOptions(vscode.workspace.isTrusted);
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
