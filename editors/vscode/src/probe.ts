/**
 * Checks, before starting the server, that an interpreter exists and can import the server
 * package, and turns each failure into a message that names the problem and its fix.
 */
import { execFile } from 'node:child_process';
import { chosenBecause, InterpreterContext, pythonSettingPlace } from './settingsPlace';

/** Prints the package version and whether torch is importable, as JSON, without importing torch. */
const PROBE_SCRIPT = [
  'import importlib.util, json, torchscan_lsp',
  'print(json.dumps({"version": torchscan_lsp.__version__,',
  '  "torch": importlib.util.find_spec("torch") is not None}))',
].join('\n');

export type ProbeResult =
  | { readonly ok: true; readonly version: string; readonly torch: boolean }
  | { readonly ok: false; readonly problem: 'no-interpreter' | 'no-package' | 'broken'; readonly detail: string };

/** Output of one interpreter run: `error.code` is a spawn error name (`ENOENT`) or an exit code. */
export interface RunOutput {
  readonly error: { code?: string | number | null } | null;
  readonly stdout: string;
  readonly stderr: string;
}

export type Runner = (command: string, args: string[]) => Promise<RunOutput>;

const runWithNode: Runner = (command, args) =>
  new Promise((resolve) => {
    execFile(command, args, { timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ error: error as RunOutput['error'], stdout, stderr });
    });
  });

function lastLine(text: string): string {
  const lines = text.trim().split(/\r?\n/);
  return lines[lines.length - 1] ?? '';
}

/** Classifies what running the probe script with `command` produced. */
export function classifyProbe(output: RunOutput): ProbeResult {
  const code = output.error?.code;
  if (code === 'ENOENT' || code === 'EACCES') {
    return { ok: false, problem: 'no-interpreter', detail: String(code) };
  }
  if (output.error === null) {
    try {
      const parsed = JSON.parse(lastLine(output.stdout)) as { version: string; torch: boolean };
      return { ok: true, version: parsed.version, torch: parsed.torch };
    } catch {
      return { ok: false, problem: 'broken', detail: `unexpected output: ${lastLine(output.stdout)}` };
    }
  }
  if (/No module named '?torchscan_lsp'?/.test(output.stderr)) {
    return { ok: false, problem: 'no-package', detail: lastLine(output.stderr) };
  }
  return { ok: false, problem: 'broken', detail: lastLine(output.stderr) || `exit code ${String(code)}` };
}

/** Runs the probe script with the interpreter `command`. */
export async function probeInterpreter(command: string, run: Runner = runWithNode): Promise<ProbeResult> {
  return classifyProbe(await run(command, ['-c', PROBE_SCRIPT]));
}

/** The command that installs the server into `command`'s environment. */
export function installCommand(command: string): string {
  const quoted = /\s/.test(command) ? `"${command}"` : command;
  return `${quoted} -m pip install torchscan-lsp`;
}

/**
 * The user-facing sentence for a failed probe: the problem, how the interpreter was chosen, then
 * the fix, naming the settings where `torchscan.python` is read in this window.
 */
export function describeProbeFailure(
  command: string,
  result: Exclude<ProbeResult, { ok: true }>,
  context: InterpreterContext = { source: 'setting', remoteName: undefined },
): string {
  const place = pythonSettingPlace(context.remoteName);
  const because = chosenBecause(context);
  switch (result.problem) {
    case 'no-interpreter':
      return (
        `torchscan-lsp: no Python interpreter found at "${command}"${because}. ` +
        `Set "torchscan.python" to a Python 3.11+ interpreter, ${place}, or select one with "Python: Select Interpreter".`
      );
    case 'no-package':
      return (
        `torchscan-lsp: the package is not installed in ${command}${because}. ` +
        `Install it with "${installCommand(command)}", or point "torchscan.python" at an environment that has it, ${place}.`
      );
    case 'broken':
      return (
        `torchscan-lsp: importing the package with ${command} failed (${result.detail}). ` +
        `Reinstall it with "${installCommand(command)}"; the log has the details.`
      );
  }
}
