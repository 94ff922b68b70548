/** Interpreter paths as users write them in settings. */
import * as os from 'node:os';
import * as path from 'node:path';

/** Expands `~` and `${workspaceFolder}` (the first folder) in a configured interpreter path. */
export function expandInterpreterPath(value: string, workspaceFolders: readonly string[]): string {
  let expanded = value.trim();
  if (workspaceFolders.length > 0) {
    expanded = expanded.split('${workspaceFolder}').join(workspaceFolders[0]);
  }
  if (expanded === '~' || expanded.startsWith('~/')) {
    expanded = path.join(os.homedir(), expanded.slice(1));
  }
  return expanded;
}
