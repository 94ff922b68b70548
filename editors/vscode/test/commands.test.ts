import { expect, test, vi } from 'vitest';
import { targetsFromCodeLenses } from '../src/commands';

vi.mock('vscode');

const range = { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } };

test('targets come from the server command lenses, each once', () => {
  const lenses = [
    { range, command: { title: 'Re-analyse', command: 'torchscan.reanalyze', arguments: ['file:///m.py', 'build'] } },
    { range, command: { title: 'Report', command: 'torchscan.showReport', arguments: ['file:///m.py', 'build', 'html'] } },
    { range, command: { title: 'Latency', command: 'torchscan.measureLatency', arguments: ['file:///m.py', 'small'] } },
    { range, command: { title: 'Other', command: 'python.run', arguments: ['file:///m.py', 'nope'] } },
    { range },
  ];
  expect(targetsFromCodeLenses(lenses)).toEqual(['build', 'small']);
  expect(targetsFromCodeLenses(null)).toEqual([]);
});
