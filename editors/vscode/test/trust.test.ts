import { afterEach, describe, expect, test, vi } from 'vitest';
import * as vscode from 'vscode';
import { mapSettings, readServerSettings } from '../src/settings';
import {
  currentInitializationOptions,
  interpreterAllowed,
  isInsideAny,
  MANAGE_TRUST_COMMAND,
  restrictedModeLenses,
} from '../src/trust';
import { useWorkspace } from './helpers';

vi.mock('vscode');

afterEach(() => {
  vi.restoreAllMocks();
});

describe('the server is told whether it may run workspace code, and that the editor is VS Code', () => {
  test('trusted workspace', () => {
    useWorkspace({ trusted: true });
    expect(currentInitializationOptions()).toEqual({ trusted: true, editor: 'vscode' });
  });

  test('untrusted workspace', () => {
    useWorkspace({ trusted: false });
    expect(currentInitializationOptions()).toEqual({ trusted: false, editor: 'vscode' });
  });
});

describe('in Restricted Mode a code lens opens the trust editor', () => {
  const summary = new vscode.CodeLens(new vscode.Range(13, 0, 13, 12), {
    title: 'torchscan: not analysed (untrusted workspace)',
    command: 'torchscan.reanalyze',
    arguments: ['file:///w/model.py', 'build'],
  });

  test('untrusted: same title and place, the trust command, no server arguments', () => {
    const [lens] = restrictedModeLenses([summary], false) ?? [];
    expect(lens.range).toEqual(summary.range);
    expect(lens.command?.title).toBe('torchscan: not analysed (untrusted workspace)');
    expect(lens.command?.command).toBe(MANAGE_TRUST_COMMAND);
    expect(lens.command?.arguments).toBeUndefined();
  });

  test('trusted: the server lenses as they came', () => {
    expect(restrictedModeLenses([summary], true)).toEqual([summary]);
  });
});

describe('allowExecution cannot grant execution in an untrusted workspace', () => {
  test('forced off when untrusted, passed on when trusted', () => {
    expect(mapSettings((key) => (key === 'allowExecution' ? true : undefined), false).settings.allowExecution).toBe(false);
    expect(mapSettings((key) => (key === 'allowExecution' ? true : undefined), true).settings.allowExecution).toBe(true);
  });

  test('through the workspace configuration', () => {
    useWorkspace({ trusted: false, settings: { 'torchscan.allowExecution': true } });
    expect(readServerSettings().settings.allowExecution).toBe(false);
  });
});

describe('interpreters inside an untrusted workspace are not started', () => {
  const folders = ['/home/me/project'];

  test('inside the workspace: refused only when untrusted', () => {
    expect(interpreterAllowed('/home/me/project/.venv/bin/python', false, folders)).toBe(false);
    expect(interpreterAllowed('/home/me/project/.venv/bin/python', true, folders)).toBe(true);
  });

  test('outside the workspace or looked up on the PATH: allowed', () => {
    expect(interpreterAllowed('/usr/bin/python3', false, folders)).toBe(true);
    expect(interpreterAllowed('python3', false, folders)).toBe(true);
    // A sibling whose name merely starts with the folder's name is outside it.
    expect(interpreterAllowed('/home/me/project-env/bin/python', false, folders)).toBe(true);
  });

  test('isInsideAny resolves relative segments', () => {
    expect(isInsideAny('/home/me/project/../project/bin/python', folders)).toBe(true);
    expect(isInsideAny('/home/me/other/bin/python', folders)).toBe(false);
  });
});
