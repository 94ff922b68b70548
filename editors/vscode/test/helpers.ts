/** Shared set-up for unit tests: a workspace with given folders, trust and `torchscan` settings. */
import { vi } from 'vitest';
import * as vscode from 'vscode';

export function useWorkspace(options: {
  trusted: boolean;
  folders?: string[];
  settings?: Record<string, unknown>;
  /** `vscode.env.remoteName`: set for a remote window (code-server, Remote-SSH…). */
  remoteName?: string;
}): void {
  (vscode.workspace as { isTrusted: boolean }).isTrusted = options.trusted;
  // jest-mock-vscode has no `env`.
  (vscode as unknown as { env: unknown }).env = { remoteName: options.remoteName, uiKind: 1, clipboard: {} };
  const folders = (options.folders ?? []).map((folder, index) => ({
    uri: vscode.Uri.file(folder),
    name: folder,
    index,
  }));
  vi.spyOn(vscode.workspace, 'workspaceFolders', 'get').mockReturnValue(folders);
  const settings = options.settings ?? {};
  vi.spyOn(vscode.workspace, 'getConfiguration').mockImplementation(
    (section?: string) =>
      ({
        get: (key: string) => settings[`${section}.${key}`],
        // the tests' settings stand for User settings
        inspect: (key: string) => ({ key: `${section}.${key}`, globalValue: settings[`${section}.${key}`] }),
      }) as unknown as ReturnType<typeof vscode.workspace.getConfiguration>,
  );
}
