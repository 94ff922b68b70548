/**
 * Drives the real Python server over stdio with vscode-languageserver-protocol (the library the
 * VS Code client is built on), announcing the capabilities vscode-languageclient 9 announces, and
 * checks the inlay hints, hover and diagnostics as VS Code would receive them.
 *
 * The interpreter comes from TORCHSCAN_PYTHON (default python3); it needs torchscan-lsp and torch.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  createProtocolConnection,
  Diagnostic,
  DiagnosticSeverity,
  Hover,
  InlayHint,
  InitializeResult,
  MarkupContent,
  ProtocolConnection,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-languageserver-protocol/node';
import { serverLaunch, STATUS_NOTIFICATION } from '../../src/launch';
import { mapSettings, SECTION } from '../../src/settingsMapping';
import { clientCapabilities } from './capabilities';
import { conv2dCost, formatCount } from './expected';

// A Conv2d(3 -> 8, 3x3) built in a module's __init__ and called from its forward, analysed on a
// 3x32x32 input; and a factory whose input has the wrong channel count.
const MODEL = [
  'import torch.nn as nn',
  '',
  '',
  'class Net(nn.Module):',
  '    def __init__(self):',
  '        super().__init__()',
  '        self.conv = nn.Conv2d(3, 8, 3)',
  '',
  '    def forward(self, x):',
  '        return self.conv(x)',
  '',
  '',
  '# torchscan: input_shape=(3, 32, 32)',
  'def build():',
  '    return Net()',
  '',
].join('\n');
// 0-based lines: the target's `def`, the model's class, where the Conv2d is built, where it is called,
// the factory's line that built the model.
const TARGET_LINE = 13;
const CLASS_LINE = 3;
const MODULE_LINE = 6;
const CALL_LINE = 9;
const BUILT_LINE = 14;
const BROKEN = ['import torch.nn as nn', '', '', '# torchscan: input_shape=(4, 32, 32)', 'def broken():', '    return nn.Conv2d(3, 8, 3)', ''].join('\n');
const BROKEN_LINE = 4;

const COST = conv2dCost({ inChannels: 3, outChannels: 8, kernel: 3, height: 32, width: 32 });

interface Status {
  uri: string;
  state: string;
  message: string;
}

let workspace: string;
let server: ChildProcess;
let connection: ProtocolConnection;
let initialized: InitializeResult;
const statuses: Status[] = [];
const pushed = new Map<string, Diagnostic[]>();
const stderr: string[] = [];

function uriOf(name: string): string {
  return pathToFileURL(path.join(workspace, name)).toString();
}

/** Resolves once `predicate` holds, checking after each notification (and every 100 ms). */
async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}; server stderr:\n${stderr.join('')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The state a document's analysis ends in; `idle` (not analysed yet) and `running` are not final. */
async function finalState(uri: string): Promise<string> {
  return until(`a final torchscan/status for ${uri}`, () => {
    const last = statuses.filter((status) => status.uri === uri).pop();
    return last !== undefined && !['idle', 'running'].includes(last.state) ? last.state : undefined;
  });
}

/** Diagnostics of a document the way VS Code gets them: pulled if the server offers it, else pushed. */
async function diagnosticsOf(uri: string): Promise<Diagnostic[]> {
  if (initialized.capabilities.diagnosticProvider !== undefined) {
    const report = await connection.sendRequest('textDocument/diagnostic', { textDocument: { uri } });
    return (report as { items?: Diagnostic[] }).items ?? [];
  }
  return until(`published diagnostics for ${uri}`, () => pushed.get(uri));
}

function open(name: string, text: string): void {
  void connection.sendNotification('textDocument/didOpen', {
    textDocument: { uri: uriOf(name), languageId: 'python', version: 1, text },
  });
}

function labelText(hint: InlayHint): string {
  return typeof hint.label === 'string' ? hint.label : hint.label.map((part) => part.value).join('');
}

beforeAll(async () => {
  workspace = mkdtempSync(path.join(tmpdir(), 'torchscan-protocol-'));
  writeFileSync(path.join(workspace, 'pyproject.toml'), '[project]\nname = "models"\n');
  writeFileSync(path.join(workspace, 'model.py'), MODEL);
  writeFileSync(path.join(workspace, 'broken.py'), BROKEN);

  const launch = serverLaunch(process.env.TORCHSCAN_PYTHON ?? 'python3');
  server = spawn(launch.command, launch.args, { cwd: workspace });
  server.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  connection = createProtocolConnection(
    new StreamMessageReader(server.stdout!),
    new StreamMessageWriter(server.stdin!),
  );
  // Answer the server's settings pull with the extension's defaults.
  connection.onRequest('workspace/configuration', (params: { items: { section?: string }[] }) =>
    params.items.map((item) => (item.section === SECTION ? mapSettings(() => undefined, true).settings : null)),
  );
  for (const method of [
    'client/registerCapability',
    'client/unregisterCapability',
    'window/workDoneProgress/create',
    'workspace/inlayHint/refresh',
    'workspace/codeLens/refresh',
    'workspace/diagnostic/refresh',
  ]) {
    connection.onRequest(method, () => null);
  }
  connection.onNotification(STATUS_NOTIFICATION, (status: Status) => statuses.push(status));
  connection.onNotification('textDocument/publishDiagnostics', (params: { uri: string; diagnostics: Diagnostic[] }) =>
    pushed.set(params.uri, params.diagnostics),
  );
  connection.listen();

  initialized = await connection.sendRequest('initialize', {
    processId: process.pid,
    clientInfo: { name: 'Visual Studio Code', version: '1.91.0' },
    rootUri: pathToFileURL(workspace).toString(),
    workspaceFolders: [{ uri: pathToFileURL(workspace).toString(), name: 'models' }],
    capabilities: clientCapabilities(),
    initializationOptions: { trusted: true },
  });
  await connection.sendNotification('initialized', {});
  open('model.py', MODEL);
  open('broken.py', BROKEN);
});

afterAll(async () => {
  try {
    await connection.sendRequest('shutdown');
    await connection.sendNotification('exit');
  } catch {
    // The server is gone already; nothing to shut down.
  }
  connection?.dispose();
  server?.kill();
  rmSync(workspace, { recursive: true, force: true });
});

describe('the server as VS Code sees it', () => {
  test('announces the features the extension relies on', () => {
    const capabilities = initialized.capabilities;
    expect(capabilities.inlayHintProvider).toBeTruthy();
    expect(capabilities.hoverProvider).toBeTruthy();
    expect(capabilities.codeLensProvider).toBeTruthy();
    expect(capabilities.executeCommandProvider?.commands).toEqual(
      expect.arrayContaining(['torchscan.reanalyze', 'torchscan.showReport', 'torchscan.measureLatency']),
    );
  });

  test('inlay hints carry the totals, the module cost and the output shape on their lines', async () => {
    expect(await finalState(uriOf('model.py'))).toBe('done');
    const hints: InlayHint[] =
      (await connection.sendRequest('textDocument/inlayHint', {
        textDocument: { uri: uriOf('model.py') },
        range: { start: { line: 0, character: 0 }, end: { line: 16, character: 0 } },
      })) ?? [];
    const byLine = new Map(hints.map((hint) => [hint.position.line, labelText(hint)]));
    const params = `${COST.parameters} params`;
    const flops = formatCount(COST.flops, 'FLOPs');
    const macs = formatCount(COST.macs, 'MACs');
    expect(byLine.get(TARGET_LINE)).toBe(`${params} · ${macs} · ${flops}`);
    expect(byLine.get(MODULE_LINE)).toBe(`${params} · ${flops}`);
    // the model's one Net instance holds only the convolution: its class line says the same
    expect(byLine.get(CLASS_LINE)).toBe(`${params} · ${flops}`);
    expect(byLine.get(CALL_LINE)).toBe(`→ (1, ${COST.outputShape.join(', ')})`);
    // `return Net()` built the model: the model's parameters and work
    expect(byLine.get(BUILT_LINE)).toBe(`${params} · ${flops}`);
    expect(hints).toHaveLength(5);
  });

  test('the hover on the module line shows its parameters and work', async () => {
    expect(await finalState(uriOf('model.py'))).toBe('done');
    const hover: Hover | null = await connection.sendRequest('textDocument/hover', {
      textDocument: { uri: uriOf('model.py') },
      position: { line: MODULE_LINE, character: 8 },
    });
    expect(hover).not.toBeNull();
    const contents = hover!.contents as MarkupContent;
    expect(contents.kind).toBe('markdown');
    expect(contents.value).toContain('Conv2d');
    expect(contents.value).toContain(`Parameters: ${COST.parameters}`);
    expect(contents.value).toContain(formatCount(COST.flops, 'FLOPs'));
    expect(contents.value).toContain(formatCount(COST.macs, 'MACs'));
  });

  test('a factory that fails gets an error diagnostic on its target line', async () => {
    expect(await finalState(uriOf('broken.py'))).toBe('failed');
    const diagnostics = await diagnosticsOf(uriOf('broken.py'));
    const errors = diagnostics.filter((diagnostic) => diagnostic.severity === DiagnosticSeverity.Error);
    expect(errors.length).toBeGreaterThan(0);
    expect(errors[0].range.start.line).toBe(BROKEN_LINE);
    expect(errors[0].message).toMatch(/channels/);
    expect(await diagnosticsOf(uriOf('model.py'))).toEqual(
      expect.not.arrayContaining([expect.objectContaining({ severity: DiagnosticSeverity.Error })]),
    );
  });
});
