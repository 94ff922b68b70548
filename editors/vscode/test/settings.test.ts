import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { configurationItem, mapSettings, readServerSettings, SETTINGS } from '../src/settings';
import { useWorkspace } from './helpers';

vi.mock('vscode');

const DEFAULTS = {
  python: null,
  allowExecution: false,
  device: 'cpu',
  timeoutSeconds: 60,
  planTimeoutSeconds: 600,
  memoryLimitMb: 8192,
  analyzeOnType: false,
  debounceMs: 500,
  maxWorkers: 2,
  headline: 'operators',
  roofline: '',
  receptiveFieldNotes: false,
  cacheResults: true,
  compareWith: 'HEAD',
  keepWarmMinutes: 10,
  inlayHints: { totals: true, modules: true, shapes: true, latency: false },
};

afterEach(() => {
  vi.restoreAllMocks();
});

describe('mapSettings', () => {
  test('nothing set gives the documented defaults, nested as the server reads them', () => {
    const mapped = mapSettings(() => undefined, true);
    expect(mapped.settings).toEqual(DEFAULTS);
    expect(mapped.problems).toEqual([]);
  });

  test('valid values pass through unchanged', () => {
    const values: Record<string, unknown> = {
      python: '/opt/py/bin/python',
      device: 'cuda:1',
      timeoutSeconds: 0.5,
      maxWorkers: 4,
      headline: 'modules',
      'inlayHints.shapes': false,
    };
    const mapped = mapSettings((key) => values[key], true);
    expect(mapped.problems).toEqual([]);
    expect(mapped.settings).toMatchObject({
      python: '/opt/py/bin/python',
      device: 'cuda:1',
      timeoutSeconds: 0.5,
      maxWorkers: 4,
      headline: 'modules',
      inlayHints: { totals: true, modules: true, shapes: false, latency: false },
    });
  });

  test('keepWarmMinutes may be 0 (the warm worker stops with the editor), not below', () => {
    expect(mapSettings((key) => (key === 'keepWarmMinutes' ? 0 : undefined), true).settings.keepWarmMinutes).toBe(0);
    const negative = mapSettings((key) => (key === 'keepWarmMinutes' ? -1 : undefined), true);
    expect(negative.settings.keepWarmMinutes).toBe(10);
    expect(negative.problems[0]?.message).toBe(
      'Setting torchscan.keepWarmMinutes must be a number, 0 or more, but is -1; ' +
        'using the default 10. Fix it in your settings.json.',
    );
  });

  test('an empty interpreter path means unset', () => {
    expect(mapSettings((key) => (key === 'python' ? '' : undefined), true).settings.python).toBeNull();
  });

  test('a value of the wrong type falls back to the default and names the setting and the fix', () => {
    const values: Record<string, unknown> = {
      timeoutSeconds: '60s',
      maxWorkers: 1.5,
      debounceMs: -5,
      device: '',
      'inlayHints.totals': 'yes',
      python: 3,
      headline: 'formulas',
    };
    const mapped = mapSettings((key) => values[key], true);
    expect(mapped.settings).toEqual(DEFAULTS);
    expect(mapped.problems.map((problem) => problem.setting).sort()).toEqual([
      'torchscan.debounceMs',
      'torchscan.device',
      'torchscan.headline',
      'torchscan.inlayHints.totals',
      'torchscan.maxWorkers',
      'torchscan.python',
      'torchscan.timeoutSeconds',
    ]);
    const timeout = mapped.problems.find((problem) => problem.setting === 'torchscan.timeoutSeconds');
    expect(timeout?.message).toBe(
      'Setting torchscan.timeoutSeconds must be a positive number, but is "60s"; ' +
        'using the default 60. Fix it in your settings.json.',
    );
    const headline = mapped.problems.find((problem) => problem.setting === 'torchscan.headline');
    expect(headline?.message).toBe(
      'Setting torchscan.headline must be "operators" or "modules", but is "formulas"; ' +
        'using the default "operators". Fix it in your settings.json.',
    );
  });
});

describe('readServerSettings and configurationItem', () => {
  test('read the torchscan section of the workspace configuration', () => {
    useWorkspace({ trusted: true, settings: { 'torchscan.device': 'mps', 'torchscan.inlayHints.latency': true } });
    expect(readServerSettings().settings).toMatchObject({ device: 'mps', inlayHints: { latency: true } });
    expect(configurationItem('torchscan.inlayHints')).toEqual({
      totals: true,
      modules: true,
      shapes: true,
      latency: true,
    });
    expect(configurationItem('torchscan.device')).toBe('mps');
  });

  test('expand the interpreter path the server also runs its workers with', () => {
    useWorkspace({
      trusted: true,
      folders: ['/home/me/project'],
      settings: { 'torchscan.python': '${workspaceFolder}/.venv/bin/python' },
    });
    expect(configurationItem('torchscan.python')).toBe('/home/me/project/.venv/bin/python');
  });

  test('leave other sections to VS Code', () => {
    useWorkspace({ trusted: true });
    expect(configurationItem('python')).toBeUndefined();
    expect(configurationItem('torchscanner')).toBeUndefined();
    expect(configurationItem(undefined)).toBeUndefined();
  });
});

describe('the manifest matches the server settings documented in docs/server.md', () => {
  const manifest = JSON.parse(readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8'));
  const properties: Record<string, { type: string | string[]; default: unknown; markdownDescription?: string }> =
    manifest.contributes.configuration.properties;

  function documentedSettings(): Map<string, { type: string; default: unknown }> {
    const serverDoc = readFileSync(path.join(__dirname, '..', '..', '..', 'docs', 'server.md'), 'utf8');
    const doc = serverDoc.split('## Settings (section `torchscan`)')[1].split('\n## ')[0];
    const rows = new Map<string, { type: string; default: unknown }>();
    for (const match of doc.matchAll(/^\| `(torchscan\.[\w.]+)` \| ([^|]+) \| ([^|]+) \|/gm)) {
      const cell = match[3].trim().replace(/^`|`$/g, '');
      const value = /^(true|false|\d+(\.\d+)?|".*")$/.test(cell) ? JSON.parse(cell) : null;
      rows.set(match[1], { type: match[2].trim(), default: value });
    }
    return rows;
  }

  test('every documented setting is contributed with its default and a description', () => {
    const documented = documentedSettings();
    expect(documented.size).toBe(19);
    expect(Object.keys(properties).sort()).toEqual([...documented.keys()].sort());
    for (const [name, row] of documented) {
      expect(properties[name].default, name).toEqual(row.default);
      expect(properties[name].markdownDescription?.length ?? 0, name).toBeGreaterThan(20);
      const types = ([] as string[]).concat(properties[name].type);
      const expected = row.type.startsWith('bool') ? ['boolean'] : row.type.startsWith('number') ? ['number', 'integer'] : ['string'];
      expect(types.some((type) => expected.includes(type)), name).toBe(true);
    }
  });

  test('the client-side table agrees with the manifest', () => {
    for (const spec of SETTINGS) {
      expect(properties[`torchscan.${spec.key}`]?.default, spec.key).toEqual(spec.default);
    }
    expect(SETTINGS.length).toBe(Object.keys(properties).length);
  });

  test('every palette command has its title', () => {
    const titles = manifest.contributes.commands.map((command: { title: string }) => command.title).sort();
    expect(titles).toEqual(['Measure latency', 'Measure memory', 'Measure training step', 'Plan training', 'Re-analyse', 'Restart server', 'Show log', 'Show report']);
  });
});
