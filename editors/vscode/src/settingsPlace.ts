/**
 * Where `torchscan.python` must live. The setting is machine-overridable (a path on one machine
 * means nothing on another), so in a remote window (Remote-SSH, WSL, a dev container, Codespaces,
 * code-server) VS Code drops it from the local User settings and reads it from that machine's
 * Remote settings or from the workspace settings. Free of the `vscode` module.
 */

/** VS Code's command that opens the Remote settings of the window's machine (remote windows only). */
export const OPEN_REMOTE_SETTINGS = 'workbench.action.openRemoteSettings';

/** How the server's interpreter was chosen (see interpreter.ts). */
export type InterpreterSource = 'setting' | 'python-extension' | 'path';

/** Where a failed interpreter came from, and where the window runs. */
export interface InterpreterContext {
  readonly source: InterpreterSource;
  /** `vscode.env.remoteName`; undefined in a local window. */
  readonly remoteName: string | undefined;
}

/** Where `torchscan.python` is read in a window, as the end of a sentence ("set it …"). */
export function pythonSettingPlace(remoteName: string | undefined): string {
  return remoteName === undefined
    ? 'in your User or workspace settings'
    : `in the Remote settings of ${remoteName} ("Preferences: Open Remote Settings") or in the workspace settings`;
}

/** Why an interpreter that the user did not configure was used. */
export function chosenBecause(context: InterpreterContext): string {
  const unset =
    context.remoteName === undefined
      ? '"torchscan.python" is not set'
      : `"torchscan.python" is not set for this remote window (${context.remoteName}), ` +
        'where VS Code ignores it in your local User settings';
  switch (context.source) {
    case 'setting':
      return '';
    case 'python-extension':
      return ` (the Python extension's active environment: ${unset})`;
    case 'path':
      return ` (found on the PATH: ${unset})`;
  }
}

/** The parts of `WorkspaceConfiguration.inspect()` that say where a value was set. */
export interface InspectedSetting {
  readonly globalValue?: unknown;
  readonly workspaceValue?: unknown;
  readonly workspaceFolderValue?: unknown;
}

/** Where the `torchscan.python` in effect was set, for the log; undefined when nowhere. */
export function settingOrigin(inspected: InspectedSetting | undefined, remoteName: string | undefined): string | undefined {
  if (inspected?.workspaceFolderValue != null) {
    return 'the folder settings';
  }
  if (inspected?.workspaceValue != null) {
    return 'the workspace settings';
  }
  if (inspected?.globalValue != null) {
    return remoteName === undefined ? 'the User settings' : 'the User or Remote settings';
  }
  return undefined;
}
