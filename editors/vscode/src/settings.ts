/** VS Code's side of the settings: reads the `torchscan` section and answers configuration pulls. */
import * as vscode from 'vscode';
import { MappedSettings, mapSettings, SECTION } from './settingsMapping';

export { MappedSettings, mapSettings, SECTION, SETTINGS, SettingProblem, SettingSpec } from './settingsMapping';

/** Reads and maps the `torchscan` section for `scope` (a document or folder), honouring trust. */
export function readServerSettings(scope?: vscode.ConfigurationScope): MappedSettings {
  const config = vscode.workspace.getConfiguration(SECTION, scope);
  return mapSettings((key) => config.get(key), vscode.workspace.isTrusted);
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
