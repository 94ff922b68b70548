import { describe, expect, test } from 'vitest';
import { classifyProbe, describeProbeFailure, installCommand, probeInterpreter } from '../src/probe';
import { settingOrigin } from '../src/settingsPlace';

describe('classifyProbe', () => {
  test('a missing interpreter', () => {
    expect(classifyProbe({ error: { code: 'ENOENT' }, stdout: '', stderr: '' })).toMatchObject({
      ok: false,
      problem: 'no-interpreter',
    });
  });

  test('an interpreter without the package', () => {
    const stderr =
      'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n' +
      "ModuleNotFoundError: No module named 'torchscan_lsp'\n";
    expect(classifyProbe({ error: { code: 1 }, stdout: '', stderr })).toEqual({
      ok: false,
      problem: 'no-package',
      detail: "ModuleNotFoundError: No module named 'torchscan_lsp'",
    });
  });

  test('a package that fails to import for another reason', () => {
    const stderr = "ModuleNotFoundError: No module named 'pygls'\n";
    expect(classifyProbe({ error: { code: 1 }, stdout: '', stderr })).toMatchObject({ ok: false, problem: 'broken' });
  });

  test('a working interpreter, with and without torch', () => {
    expect(classifyProbe({ error: null, stdout: '{"version": "0.1.0", "torch": true}\n', stderr: '' })).toEqual({
      ok: true,
      version: '0.1.0',
      torch: true,
    });
    expect(classifyProbe({ error: null, stdout: '{"version": "0.1.0", "torch": false}', stderr: '' })).toMatchObject({
      torch: false,
    });
  });
});

describe('messages name the problem and the fix', () => {
  test('no interpreter points at the setting', () => {
    const text = describeProbeFailure('/nope/python', { ok: false, problem: 'no-interpreter', detail: 'ENOENT' });
    expect(text).toContain('no Python interpreter found at "/nope/python"');
    expect(text).toContain('torchscan.python');
  });

  test('no package gives the install command for that interpreter', () => {
    const text = describeProbeFailure('/usr/bin/python3', { ok: false, problem: 'no-package', detail: '' });
    expect(text).toContain('/usr/bin/python3 -m pip install torchscan-lsp');
  });

  test('a local window names the User and workspace settings', () => {
    const text = describeProbeFailure('python3', { ok: false, problem: 'no-package', detail: '' }, { source: 'path', remoteName: undefined });
    expect(text).toContain('the package is not installed in python3 (found on the PATH: "torchscan.python" is not set)');
    expect(text).toContain('or point "torchscan.python" at an environment that has it, in your User or workspace settings.');
  });

  test('a remote window says that local User settings do not count there, and where the setting must go', () => {
    // VS Code drops machine-overridable settings from the local User settings in a remote window.
    const text = describeProbeFailure(
      'python3',
      { ok: false, problem: 'no-package', detail: '' },
      { source: 'path', remoteName: 'ssh-remote' },
    );
    expect(text).toContain('"torchscan.python" is not set for this remote window (ssh-remote), where VS Code ignores it in your local User settings');
    expect(text).toContain('in the Remote settings of ssh-remote ("Preferences: Open Remote Settings") or in the workspace settings');
    const missing = describeProbeFailure(
      'python3',
      { ok: false, problem: 'no-interpreter', detail: 'ENOENT' },
      { source: 'python-extension', remoteName: 'wsl' },
    );
    expect(missing).toContain("(the Python extension's active environment: \"torchscan.python\" is not set for this remote window (wsl)");
    expect(missing).toContain('Set "torchscan.python" to a Python 3.11+ interpreter, in the Remote settings of wsl');
  });

  test('the log names where the interpreter setting in effect was set, the innermost first', () => {
    expect(settingOrigin({ globalValue: '/a', workspaceValue: '/b', workspaceFolderValue: '/c' }, undefined)).toBe('the folder settings');
    expect(settingOrigin({ globalValue: '/a', workspaceValue: '/b' }, undefined)).toBe('the workspace settings');
    expect(settingOrigin({ globalValue: '/a' }, undefined)).toBe('the User settings');
    expect(settingOrigin({ globalValue: '/a' }, 'ssh-remote')).toBe('the User or Remote settings');
    expect(settingOrigin({ globalValue: null }, undefined)).toBeUndefined();
  });

  test('paths with spaces are quoted in the install command', () => {
    expect(installCommand('/Program Files/Python/python')).toBe('"/Program Files/Python/python" -m pip install torchscan-lsp');
  });
});

test('probeInterpreter runs the interpreter with -c and a script', async () => {
  const calls: Array<[string, string[]]> = [];
  const result = await probeInterpreter('py', async (command, args) => {
    calls.push([command, args]);
    return { error: null, stdout: '{"version": "1.2.3", "torch": false}', stderr: '' };
  });
  expect(result).toEqual({ ok: true, version: '1.2.3', torch: false });
  expect(calls[0][0]).toBe('py');
  expect(calls[0][1][0]).toBe('-c');
  expect(calls[0][1][1]).toContain('import importlib.util, json, torchscan_lsp');
});
