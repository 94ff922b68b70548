import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import * as vscode from 'vscode';
import { activate, deactivate } from '../src/extension';
import { probeInterpreter } from '../src/probe';
import { UNTRUSTED_EXPLANATION } from '../src/trust';
import { control as clients } from './fakeLanguageClient';
import { useWorkspace } from './helpers';

vi.mock('vscode');
vi.mock('vscode-languageclient/node', () => import('./fakeLanguageClient'));
vi.mock('../src/probe', async (original) => ({
  ...(await original<typeof import('../src/probe')>()),
  probeInterpreter: vi.fn(),
}));

/** Captures the listener an event registration receives, so the test can fire the event. */
function capture<T>(event: keyof typeof vscode.workspace): () => (value: T) => unknown {
  let listener: ((value: T) => unknown) | undefined;
  vi.spyOn(vscode.workspace, event as never).mockImplementation(((handler: (value: T) => unknown) => {
    listener = handler;
    return { dispose: () => undefined };
  }) as never);
  return () => listener!;
}

async function activated() {
  const context = { subscriptions: [] as unknown[] } as unknown as vscode.ExtensionContext;
  vi.mocked(vscode.window.createOutputChannel).mockReturnValue({
    info: vi.fn(),
    warn: vi.fn(),
    error: vi.fn(),
    show: vi.fn(),
    dispose: vi.fn(),
  } as never);
  (vscode as unknown as { extensions: unknown }).extensions = { getExtension: () => undefined };
  const grant = capture<void>('onDidGrantWorkspaceTrust');
  const change = capture<vscode.ConfigurationChangeEvent>('onDidChangeConfiguration');
  await activate(context);
  return { context, grant, change };
}

/** Lets queued restarts (promise chains) finish. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i += 1) {
    await Promise.resolve();
  }
}

beforeEach(() => {
  clients.reset();
  vi.mocked(probeInterpreter).mockResolvedValue({ ok: true, version: '0.1.0', torch: true });
});

afterEach(async () => {
  await deactivate();
  vi.restoreAllMocks();
  vi.mocked(vscode.window.showInformationMessage).mockClear();
  vi.mocked(vscode.window.showWarningMessage).mockClear();
  vi.mocked(vscode.commands.registerCommand).mockClear();
});

test('registers the eight palette commands', async () => {
  useWorkspace({ trusted: true });
  await activated();
  const ids = vi.mocked(vscode.commands.registerCommand).mock.calls.map((call) => call[0]);
  expect(ids.sort()).toEqual([
    'torchscan-lsp.measureLatency',
    'torchscan-lsp.measureMemory',
    'torchscan-lsp.measureTraining',
    'torchscan-lsp.planTraining',
    'torchscan-lsp.reanalyze',
    'torchscan-lsp.restart',
    'torchscan-lsp.showLog',
    'torchscan-lsp.showReport',
  ]);
});

test('an untrusted workspace says why nothing runs, and granting trust restarts as trusted', async () => {
  useWorkspace({ trusted: false });
  const { grant } = await activated();
  expect(vscode.window.showInformationMessage).toHaveBeenCalledWith(UNTRUSTED_EXPLANATION, 'Manage workspace trust');
  expect(clients.created.map((client) => client.clientOptions.initializationOptions)).toEqual([{ trusted: false, editor: 'vscode' }]);

  (vscode.workspace as { isTrusted: boolean }).isTrusted = true;
  grant()();
  await vi.waitFor(() => expect(clients.created).toHaveLength(2));
  expect(clients.created[1].clientOptions.initializationOptions).toEqual({ trusted: true, editor: 'vscode' });
});

test('a settings change restarts the server and reports a wrongly typed value', async () => {
  useWorkspace({ trusted: true });
  const { change } = await activated();
  expect(clients.created).toHaveLength(1);

  useWorkspace({ trusted: true, settings: { 'torchscan.maxWorkers': 'two', 'torchscan.device': 'cuda' } });
  change()({ affectsConfiguration: (section: string) => section === 'torchscan' });
  await vi.waitFor(() => expect(clients.created).toHaveLength(2));
  const [warning] = vi.mocked(vscode.window.showWarningMessage).mock.calls[0] as unknown as string[];
  expect(warning).toContain('torchscan.maxWorkers must be a positive whole number');

  change()({ affectsConfiguration: (section: string) => section === 'editor' });
  await settle();
  expect(clients.created).toHaveLength(2);
});

test('a settings event that changes nothing the server gets does not restart it', async () => {
  // VS Code fires one right after trust is granted, which has restarted the server already
  useWorkspace({ trusted: true, settings: { 'torchscan.device': 'cuda' } });
  const { change } = await activated();
  change()({ affectsConfiguration: (section: string) => section === 'torchscan' });
  await settle();
  expect(clients.created).toHaveLength(1);
  // an invalid value stands for its default: still nothing new for the server
  useWorkspace({ trusted: true, settings: { 'torchscan.device': 'cuda', 'torchscan.maxWorkers': 'two' } });
  change()({ affectsConfiguration: (section: string) => section === 'torchscan' });
  await settle();
  expect(clients.created).toHaveLength(1);
});
