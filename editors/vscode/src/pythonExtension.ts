/**
 * The part of the Python extension's (ms-python.python) public API that we use: the active
 * environment of a resource and the event that it changed. Typed here so that the extension
 * works, and compiles, without it installed.
 */
import * as vscode from 'vscode';

export const PYTHON_EXTENSION_ID = 'ms-python.python';

interface EnvironmentPath {
  readonly id: string;
  readonly path: string;
}

interface ResolvedEnvironment {
  readonly executable: { readonly uri?: vscode.Uri };
}

/** The environments API exported by ms-python.python. */
export interface PythonEnvironmentsApi {
  getActiveEnvironmentPath(resource?: vscode.Uri): EnvironmentPath;
  resolveEnvironment(environment: EnvironmentPath | string): Promise<ResolvedEnvironment | undefined>;
  readonly onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
}

/** The Python extension's environments API, or `undefined` when it is not installed. */
export async function pythonEnvironments(): Promise<PythonEnvironmentsApi | undefined> {
  const extension = vscode.extensions.getExtension<{ environments?: PythonEnvironmentsApi }>(
    PYTHON_EXTENSION_ID,
  );
  if (extension === undefined) {
    return undefined;
  }
  const api = extension.isActive ? extension.exports : await extension.activate();
  return api?.environments;
}

/** The interpreter of the active environment for `resource`, if the Python extension knows one. */
export async function activeInterpreter(
  api: PythonEnvironmentsApi | undefined,
  resource?: vscode.Uri,
): Promise<string | undefined> {
  if (api === undefined) {
    return undefined;
  }
  const resolved = await api.resolveEnvironment(api.getActiveEnvironmentPath(resource));
  return resolved?.executable.uri?.fsPath;
}
