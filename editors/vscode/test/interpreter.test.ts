import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, test, vi } from 'vitest';
import * as vscode from 'vscode';
import { pathFallback, selectInterpreter } from '../src/interpreter';
import { expandInterpreterPath } from '../src/paths';
import { PythonEnvironmentsApi, pythonEnvironments } from '../src/pythonExtension';
import { useWorkspace } from './helpers';

vi.mock('vscode');

const WORKSPACE = '/home/me/project';

/** A Python extension API whose active environment is `executable` (or none). */
function pythonApi(executable: string | undefined): PythonEnvironmentsApi {
  return {
    getActiveEnvironmentPath: () => ({ id: 'env', path: executable ?? '' }),
    resolveEnvironment: async () =>
      executable === undefined ? undefined : { executable: { uri: vscode.Uri.file(executable) } },
    onDidChangeActiveEnvironmentPath: () => ({ dispose: () => undefined }),
  };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('selectInterpreter', () => {
  test('torchscan.python wins over the Python extension', async () => {
    useWorkspace({ trusted: true, folders: [WORKSPACE], settings: { 'torchscan.python': '/opt/ts/bin/python' } });
    const chosen = await selectInterpreter(pythonApi('/usr/local/bin/python3.12'));
    expect(chosen).toEqual({ command: '/opt/ts/bin/python', source: 'setting', skipped: [] });
  });

  test("then the Python extension's active environment", async () => {
    useWorkspace({ trusted: true, folders: [WORKSPACE] });
    const chosen = await selectInterpreter(pythonApi(`${WORKSPACE}/.venv/bin/python`));
    expect(chosen).toEqual({ command: `${WORKSPACE}/.venv/bin/python`, source: 'python-extension', skipped: [] });
  });

  test('then python3 on the PATH', async () => {
    useWorkspace({ trusted: true, folders: [WORKSPACE] });
    expect(await selectInterpreter(undefined)).toEqual({ command: pathFallback(), source: 'path', skipped: [] });
    expect(await selectInterpreter(pythonApi(undefined))).toMatchObject({ source: 'path' });
  });

  test('the PATH name is python on Windows, python3 elsewhere', () => {
    expect(pathFallback('linux')).toBe('python3');
    expect(pathFallback('darwin')).toBe('python3');
    expect(pathFallback('win32')).toBe('python');
  });

  test('untrusted: interpreters inside the workspace are skipped, with the reason', async () => {
    useWorkspace({
      trusted: false,
      folders: [WORKSPACE],
      settings: { 'torchscan.python': '${workspaceFolder}/.venv/bin/python' },
    });
    const outside = await selectInterpreter(pythonApi('/usr/bin/python3.11'));
    expect(outside.command).toBe('/usr/bin/python3.11');
    expect(outside.source).toBe('python-extension');
    expect(outside.skipped).toEqual([`${WORKSPACE}/.venv/bin/python (from setting) lies inside the untrusted workspace`]);

    const inside = await selectInterpreter(pythonApi(`${WORKSPACE}/env/bin/python`));
    expect(inside.source).toBe('path');
    expect(inside.skipped).toHaveLength(2);
  });

  test('a failing Python extension falls back and says why', async () => {
    useWorkspace({ trusted: true, folders: [WORKSPACE] });
    const broken = pythonApi('/x');
    broken.resolveEnvironment = async () => {
      throw new Error('extension not ready');
    };
    const chosen = await selectInterpreter(broken);
    expect(chosen.source).toBe('path');
    expect(chosen.skipped).toEqual(['python-extension failed: extension not ready']);
  });
});

describe('expandInterpreterPath', () => {
  test('expands the workspace folder and the home directory', () => {
    expect(expandInterpreterPath('${workspaceFolder}/.venv/bin/python', [WORKSPACE])).toBe(`${WORKSPACE}/.venv/bin/python`);
    expect(expandInterpreterPath('~/envs/ts/bin/python', [])).toBe(path.join(os.homedir(), 'envs/ts/bin/python'));
    expect(expandInterpreterPath(' /usr/bin/python3 ', [])).toBe('/usr/bin/python3');
  });
});

describe('pythonEnvironments', () => {
  test('undefined without the Python extension', async () => {
    (vscode as unknown as { extensions: unknown }).extensions = { getExtension: () => undefined };
    expect(await pythonEnvironments()).toBeUndefined();
  });

  test("activates the Python extension and returns its environments API", async () => {
    const api = pythonApi('/usr/bin/python3');
    const activate = vi.fn(async () => ({ environments: api }));
    (vscode as unknown as { extensions: unknown }).extensions = {
      getExtension: (id: string) => (id === 'ms-python.python' ? { isActive: false, activate } : undefined),
    };
    expect(await pythonEnvironments()).toBe(api);
    expect(activate).toHaveBeenCalledOnce();
  });
});
