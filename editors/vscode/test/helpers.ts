/** Shared set-up for unit tests: a workspace with given folders, trust and `torchscan` settings. */
import { vi } from 'vitest';
import * as vscode from 'vscode';

export function useWorkspace(options: {
  trusted: boolean;
  folders?: string[];
  settings?: Record<string, unknown>;
}): void {
  (vscode.workspace as { isTrusted: boolean }).isTrusted = options.trusted;
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
      }) as unknown as ReturnType<typeof vscode.workspace.getConfiguration>,
  );
}
