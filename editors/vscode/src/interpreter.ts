/**
 * Which Python starts the server: `torchscan.python`, else the Python extension's active
 * environment, else `python3` on the PATH.
 */
import * as vscode from 'vscode';
import { activeInterpreter, PythonEnvironmentsApi } from './pythonExtension';
import { readServerSettings } from './settings';
import { InterpreterSource } from './settingsPlace';
import { interpreterAllowed } from './trust';

export { InterpreterSource } from './settingsPlace';


export interface Interpreter {
  readonly command: string;
  readonly source: InterpreterSource;
  /** Why a preferred interpreter was passed over, for the log. */
  readonly skipped: string[];
}

/** The interpreter name looked up on the PATH when nothing else is chosen. */
export function pathFallback(platform: NodeJS.Platform = process.platform): string {
  return platform === 'win32' ? 'python' : 'python3';
}

/**
 * Chooses the interpreter for `resource`'s workspace. In an untrusted workspace an interpreter
 * inside a workspace folder is skipped (see trust.ts), and the next candidate is used.
 */
export async function selectInterpreter(
  pythonApi: PythonEnvironmentsApi | undefined,
  resource?: vscode.Uri,
): Promise<Interpreter> {
  const trusted = vscode.workspace.isTrusted;
  const folders = (vscode.workspace.workspaceFolders ?? []).map((folder) => folder.uri.fsPath);
  const skipped: string[] = [];
  const candidates: Array<[InterpreterSource, () => Promise<string | undefined>]> = [
    [
      'setting',
      async () => {
        const configured = readServerSettings(resource).settings.python;
        return typeof configured === 'string' ? configured : undefined;
      },
    ],
    ['python-extension', () => activeInterpreter(pythonApi, resource)],
  ];
  for (const [source, find] of candidates) {
    let command: string | undefined;
    try {
      command = await find();
    } catch (error) {
      skipped.push(`${source} failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (command === undefined) {
      continue;
    }
    if (interpreterAllowed(command, trusted, folders)) {
      return { command, source, skipped };
    }
    skipped.push(`${command} (from ${source}) lies inside the untrusted workspace`);
  }
  return { command: pathFallback(), source: 'path', skipped };
}
