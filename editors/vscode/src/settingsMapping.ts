/**
 * The server's settings (section `torchscan`): their types and defaults, and the mapping of raw
 * values to the object the server receives from `workspace/configuration`. Free of the `vscode`
 * module, so that the protocol-level test can use it too.
 */

export const SECTION = 'torchscan';

/** JSON type a setting must have; numbers are positive (or zero, `zeroAllowed`), `string|null` accepts unset (null). */
export type SettingType = 'string' | 'string|null' | 'boolean' | 'number';

/** One setting of the server, as docs/server.md lists it. */
export interface SettingSpec {
  /** Key below the section, dotted for nested settings (`inlayHints.totals`). */
  readonly key: string;
  readonly type: SettingType;
  readonly default: string | number | boolean | null;
  /** Whether a number setting must be a whole number. */
  readonly integer?: boolean;
  /** Whether a number setting may be zero (it turns something off). */
  readonly zeroAllowed?: boolean;
  /** The words a string setting may take, when it takes only a few. */
  readonly choices?: readonly string[];
  /** Whether a string setting may be empty (its default is then "", meaning: not set). */
  readonly allowEmpty?: boolean;
}

export const SETTINGS: readonly SettingSpec[] = [
  { key: 'python', type: 'string|null', default: null },
  { key: 'allowExecution', type: 'boolean', default: false },
  { key: 'device', type: 'string', default: 'cpu' },
  { key: 'timeoutSeconds', type: 'number', default: 60 },
  { key: 'planTimeoutSeconds', type: 'number', default: 600 },
  { key: 'memoryLimitMb', type: 'number', default: 8192 },
  { key: 'analyzeOnType', type: 'boolean', default: false },
  { key: 'debounceMs', type: 'number', default: 500 },
  { key: 'maxWorkers', type: 'number', default: 2, integer: true },
  { key: 'headline', type: 'string', default: 'operators', choices: ['operators', 'modules'] },
  { key: 'roofline', type: 'string', default: '', allowEmpty: true },
  { key: 'receptiveFieldNotes', type: 'boolean', default: false },
  { key: 'cacheResults', type: 'boolean', default: true },
  { key: 'compareWith', type: 'string', default: 'HEAD' },
  { key: 'keepWarmMinutes', type: 'number', default: 10, zeroAllowed: true },
  { key: 'inlayHints.totals', type: 'boolean', default: true },
  { key: 'inlayHints.modules', type: 'boolean', default: true },
  { key: 'inlayHints.shapes', type: 'boolean', default: true },
  { key: 'inlayHints.latency', type: 'boolean', default: false },
];

/** A setting whose value was unusable and was replaced by its default. */
export interface SettingProblem {
  readonly setting: string;
  readonly message: string;
}

export interface MappedSettings {
  /** Nested object for the `torchscan` section, e.g. `{device: 'cpu', inlayHints: {totals: true}}`. */
  readonly settings: Record<string, unknown>;
  readonly problems: SettingProblem[];
}

function expectation(spec: SettingSpec): string {
  switch (spec.type) {
    case 'string|null':
      return 'a path (a string) or null';
    case 'string':
      return spec.choices
        ? spec.choices.map((word) => JSON.stringify(word)).join(' or ')
        : spec.allowEmpty
          ? 'a string'
          : 'a non-empty string';
    case 'boolean':
      return 'true or false';
    case 'number':
      if (spec.zeroAllowed) {
        return spec.integer ? 'a whole number, 0 or more' : 'a number, 0 or more';
      }
      return spec.integer ? 'a positive whole number' : 'a positive number';
  }
}

function isValid(spec: SettingSpec, value: unknown): boolean {
  switch (spec.type) {
    case 'string|null':
      return value === null || typeof value === 'string';
    case 'string':
      return (
        typeof value === 'string' &&
        (spec.allowEmpty || value.trim() !== '') &&
        (!spec.choices || spec.choices.includes(value))
      );
    case 'boolean':
      return typeof value === 'boolean';
    case 'number':
      return (
        typeof value === 'number' &&
        Number.isFinite(value) &&
        (value > 0 || (spec.zeroAllowed === true && value === 0)) &&
        (!spec.integer || Number.isInteger(value))
      );
  }
}

function setPath(target: Record<string, unknown>, dotted: string, value: unknown): void {
  const parts = dotted.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    node[part] ??= {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts[parts.length - 1]] = value;
}

/**
 * Maps raw values (read through `get`, by key below the section) to the server's settings object.
 * A value of the wrong type is replaced by the default and reported, so that one typo in
 * settings.json degrades one setting instead of the whole server. In an untrusted workspace
 * `allowExecution` is forced off: workspace settings must not be able to grant themselves execution.
 */
export function mapSettings(get: (key: string) => unknown, trusted: boolean): MappedSettings {
  const settings: Record<string, unknown> = {};
  const problems: SettingProblem[] = [];
  for (const spec of SETTINGS) {
    let value = get(spec.key);
    if (value === undefined || (spec.type === 'string|null' && value === '')) {
      value = spec.default;
    } else if (!isValid(spec, value)) {
      const name = `${SECTION}.${spec.key}`;
      problems.push({
        setting: name,
        message:
          `Setting ${name} must be ${expectation(spec)}, but is ${JSON.stringify(value)}; ` +
          `using the default ${JSON.stringify(spec.default)}. Fix it in your settings.json.`,
      });
      value = spec.default;
    }
    if (spec.key === 'allowExecution' && !trusted) {
      value = false;
    }
    setPath(settings, spec.key, value);
  }
  return { settings, problems };
}

