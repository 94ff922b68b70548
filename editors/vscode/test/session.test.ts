import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import * as vscode from 'vscode';
import { probeInterpreter } from '../src/probe';
import { ReportPanels } from '../src/reportView';
import { endProcess, ServerSession } from '../src/session';
import { StatusBar } from '../src/status';
import { control as clients } from './fakeLanguageClient';
import { useWorkspace } from './helpers';

vi.mock('vscode');
vi.mock('../src/probe', async (original) => ({
  ...(await original<typeof import('../src/probe')>()),
  probeInterpreter: vi.fn(),
}));

vi.mock('vscode-languageclient/node', () => import('./fakeLanguageClient'));
vi.mock('node:child_process', () => ({ spawn: vi.fn() }));

/** A server process as `spawn` returns it: three streams, an exit status and `kill`. */
function fakeChild() {
  const child = Object.assign(new EventEmitter(), {
    stdin: new PassThrough(),
    stdout: new PassThrough(),
    stderr: new PassThrough(),
    exitCode: null as number | null,
    signalCode: null as string | null,
    kill: vi.fn(() => {
      child.signalCode = 'SIGTERM';
      child.emit('exit', null);
      return true;
    }),
  });
  return child;
}

function newSession() {
  const log = { info: vi.fn(), warn: vi.fn(), error: vi.fn(), show: vi.fn() };
  const item = vscode.window.createStatusBarItem('test', vscode.StatusBarAlignment.Right, 1);
  const session = new ServerSession(
    log as unknown as vscode.LogOutputChannel,
    new StatusBar(item, 'torchscan-lsp.showLog'),
    async () => undefined,
    new ReportPanels(log as unknown as vscode.LogOutputChannel),
  );
  return { session, log, item };
}

beforeEach(() => {
  clients.reset();
});

afterEach(() => {
  vi.restoreAllMocks();
  vi.mocked(probeInterpreter).mockReset();
  vi.mocked(vscode.window.showErrorMessage).mockClear();
  vi.mocked(vscode.window.showWarningMessage).mockClear();
});

describe('bad input gives one clear message and no client', () => {
  test('a missing interpreter', async () => {
    useWorkspace({ trusted: true, settings: { 'torchscan.python': '/nope/python' } });
    vi.mocked(probeInterpreter).mockResolvedValue({ ok: false, problem: 'no-interpreter', detail: 'ENOENT' });
    const { session, item } = newSession();
    await session.start();
    expect(clients.created).toHaveLength(0);
    expect(vscode.window.showErrorMessage).toHaveBeenCalledOnce();
    const [message, ...buttons] = vi.mocked(vscode.window.showErrorMessage).mock.calls[0] as unknown as string[];
    expect(message).toContain('no Python interpreter found at "/nope/python"');
    expect(buttons).toEqual(['Open settings', 'Show log']);
    expect(item.text).toContain('stopped');
  });

  test('an interpreter without the package offers the install command', async () => {
    useWorkspace({ trusted: true, settings: { 'torchscan.python': '/usr/bin/python3' } });
    vi.mocked(probeInterpreter).mockResolvedValue({ ok: false, problem: 'no-package', detail: '' });
    const { session } = newSession();
    await session.start();
    const [message, ...buttons] = vi.mocked(vscode.window.showErrorMessage).mock.calls[0] as unknown as string[];
    expect(message).toContain('/usr/bin/python3 -m pip install torchscan-lsp');
    expect(buttons).toEqual(['Show install command', 'Show log']);
  });

  test('in a remote window, a fallback interpreter without the package points at the Remote settings', async () => {
    useWorkspace({ trusted: true, remoteName: '127.0.0.1:8080' });
    vi.mocked(probeInterpreter).mockResolvedValue({ ok: false, problem: 'no-package', detail: '' });
    const { session } = newSession();
    await session.start();
    const [message, ...buttons] = vi.mocked(vscode.window.showErrorMessage).mock.calls[0] as unknown as string[];
    expect(message).toContain('"torchscan.python" is not set for this remote window (127.0.0.1:8080)');
    expect(message).toContain('in the Remote settings of 127.0.0.1:8080');
    expect(buttons).toEqual(['Open Remote Settings', 'Show install command', 'Show log']);
  });

  test('a server that exits at start', async () => {
    useWorkspace({ trusted: true, settings: { 'torchscan.python': '/usr/bin/python3' } });
    vi.mocked(probeInterpreter).mockResolvedValue({ ok: true, version: '0.1.0', torch: true });
    clients.startError = new Error('Pending response rejected since connection got disposed');
    const { session } = newSession();
    await session.start();
    expect(session.running).toBeUndefined();
    const [message, ...buttons] = vi.mocked(vscode.window.showErrorMessage).mock.calls[0] as unknown as string[];
    expect(buttons).toEqual(['Show install command', 'Show log']);
    expect(message).toContain('the server exited at start');
    expect(message).toContain('connection got disposed');
    expect(message).toContain('/usr/bin/python3 -m pip install torchscan-lsp');
  });

  test('torch missing warns but starts the server', async () => {
    useWorkspace({ trusted: true, settings: { 'torchscan.python': '/usr/bin/python3' } });
    vi.mocked(probeInterpreter).mockResolvedValue({ ok: true, version: '0.1.0', torch: false });
    const { session } = newSession();
    await session.start();
    expect(session.running).toBeDefined();
    const [warning] = vi.mocked(vscode.window.showWarningMessage).mock.calls[0] as unknown as string[];
    expect(warning).toContain('torch is not installed in /usr/bin/python3');
    expect(vscode.window.showErrorMessage).not.toHaveBeenCalled();
  });
});

test('the client tells the server whether the workspace is trusted', async () => {
  vi.mocked(probeInterpreter).mockResolvedValue({ ok: true, version: '0.1.0', torch: true });
  for (const trusted of [true, false]) {
    useWorkspace({ trusted });
    clients.created.length = 0;
    const { session } = newSession();
    await session.start();
    expect(clients.created[0].clientOptions.initializationOptions).toEqual({ trusted, editor: 'vscode' });
  }
});

test('the client selects Python files, unsaved Python editors and the Python cells of Jupyter notebooks', async () => {
  vi.mocked(probeInterpreter).mockResolvedValue({ ok: true, version: '0.1.0', torch: true });
  useWorkspace({ trusted: true });
  const { session } = newSession();
  await session.start();
  // a notebook cell's document has the vscode-notebook-cell scheme: only the notebook filter takes it
  expect(clients.created[0].clientOptions.documentSelector).toEqual([
    { scheme: 'file', language: 'python' },
    { scheme: 'untitled', language: 'python' },
    { notebook: 'jupyter-notebook', language: 'python' },
  ]);
});

describe('the server process', () => {
  test('each stderr line is logged once, and the client gets streams, not the process', async () => {
    useWorkspace({ trusted: true, settings: { 'torchscan.python': '/usr/bin/python3' } });
    vi.mocked(probeInterpreter).mockResolvedValue({ ok: true, version: '0.1.0', torch: true });
    const child = fakeChild();
    vi.mocked(spawn).mockReturnValue(child as never);
    const { session, log } = newSession();
    await session.start();
    const serverOptions = clients.created[0].serverOptions as () => Promise<Record<string, unknown>>;
    const transport = await serverOptions();
    // Given a ChildProcess, vscode-languageclient would copy its stderr into the log a second time.
    expect(Object.keys(transport).sort()).toEqual(['reader', 'writer']);
    expect(transport.reader).toBe(child.stdout);
    // A line split across two chunks is still one line; blank lines are dropped.
    child.stderr.write('INFO torchscan: started\nWARNING torch');
    child.stderr.write('scan: slow\n\n');
    child.stderr.end();
    await vi.waitFor(() => expect(log.info).toHaveBeenCalledWith('[server] WARNING torchscan: slow'));
    const server = log.info.mock.calls.map((call) => call[0] as string).filter((line) => line.startsWith('[server]'));
    expect(server).toEqual(['[server] INFO torchscan: started', '[server] WARNING torchscan: slow']);
  });

  test('a server that does not exit after the client stopped is killed after the grace time', async () => {
    const stubborn = fakeChild();
    await endProcess(stubborn as never, 10);
    expect(stubborn.kill).toHaveBeenCalledOnce();
    const polite = fakeChild();
    setTimeout(() => polite.emit('exit', 0), 1);
    await endProcess(polite as never, 1000);
    expect(polite.kill).not.toHaveBeenCalled();
  });
});
