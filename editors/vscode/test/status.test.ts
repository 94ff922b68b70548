import { describe, expect, test, vi } from 'vitest';
import * as vscode from 'vscode';
import { presentStatus, StatusBar } from '../src/status';

vi.mock('vscode');

function statusBar() {
  const item = vscode.window.createStatusBarItem('test', vscode.StatusBarAlignment.Right, 1);
  return { item, bar: new StatusBar(item, 'torchscan-lsp.showLog') };
}

describe('StatusBar', () => {
  test('a click opens the log', () => {
    expect(statusBar().item.command).toBe('torchscan-lsp.showLog');
  });

  test("shows the active document's state and hides for documents without one", () => {
    const { item, bar } = statusBar();
    bar.setActive('file:///a.py');
    bar.update({ uri: 'file:///b.py', state: 'running', message: '' });
    expect(item.hide).toHaveBeenCalled();
    bar.update({ uri: 'file:///a.py', state: 'failed', message: 'forward: shape mismatch' });
    expect(item.text).toContain('failed');
    expect(item.tooltip).toContain('forward: shape mismatch');
    expect(item.backgroundColor).toBeInstanceOf(vscode.ThemeColor);
    bar.setActive('file:///b.py');
    expect(item.text).toContain('running');
    expect(item.backgroundColor).toBeUndefined();
  });

  test('a server problem is shown whatever the document', () => {
    const { item, bar } = statusBar();
    bar.setServerProblem('no Python interpreter found');
    expect(item.text).toContain('stopped');
    expect(item.tooltip).toContain('no Python interpreter found');
    bar.setServerProblem(undefined);
    expect(item.hide).toHaveBeenCalled();
  });
});

test('each state has its own text', () => {
  const states = ['running', 'done', 'stale', 'failed', 'untrusted', 'idle'] as const;
  const texts = states.map((state) => presentStatus({ uri: 'u', state, message: '' }).text);
  expect(new Set(texts).size).toBe(states.length);
  texts.forEach((text, index) => expect(text).toContain(states[index]));
});
