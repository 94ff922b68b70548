/** VS Code's side of the settings: reads the `torchscan` section and answers configuration pulls. */
import * as vscode from 'vscode';
import { expandInterpreterPath } from './paths';
import { MappedSettings, mapSettings, SECTION } from './settingsMapping';

export { MappedSettings, mapSettings, SECTION, SETTINGS, SettingProblem, SettingSpec } from './settingsMapping';

/**
 * Reads and maps the `torchscan` section for `scope` (a document or folder), honouring trust.
 * The interpreter path is expanded here, because the server runs its workers with it too.
 */
export function readServerSettings(scope?: vscode.ConfigurationScope): MappedSettings {
  const config = vscode.workspace.getConfiguration(SECTION, scope);
  const mapped = mapSettings((key) => config.get(key), vscode.workspace.isTrusted);
  if (typeof mapped.settings.python === 'string') {
    const folders = (vscode.workspace.workspaceFolders ?? []).map((folder) => folder.uri.fsPath);
    mapped.settings.python = expandInterpreterPath(mapped.settings.python, folders);
  }
  return mapped;
}

/**
 * Answers one `workspace/configuration` item: the mapped section, or the part of it that a
 * dotted sub-section (`torchscan.inlayHints`) names; `undefined` when the item is not ours.
 */
export function configurationItem(
  section: string | undefined,
  scope?: vscode.ConfigurationScope,
): unknown {
  if (section !== SECTION && !section?.startsWith(`${SECTION}.`)) {
    return undefined;
  }
  let node: unknown = readServerSettings(scope).settings;
  for (const part of section.split('.').slice(1)) {
    node = (node as Record<string, unknown> | undefined)?.[part];
  }
  return node ?? null;
}
