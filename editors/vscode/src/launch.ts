/** How the server process is started; shared by the extension and the protocol-level test. */

export interface LaunchCommand {
  readonly command: string;
  readonly args: string[];
}

/** The server over stdio, run by `python`. */
export function serverLaunch(python: string): LaunchCommand {
  return { command: python, args: ['-m', 'torchscan_lsp', 'serve'] };
}

/** The custom notification that carries the analysis state of one document. */
export const STATUS_NOTIFICATION = 'torchscan/status';

/** The server's commands (workspace/executeCommand), as docs/server.md names them. */
export const SERVER_COMMANDS = {
  reanalyze: 'torchscan.reanalyze',
  showReport: 'torchscan.showReport',
  measureLatency: 'torchscan.measureLatency',
  measureMemory: 'torchscan.measureMemory',
  measureTraining: 'torchscan.measureTraining',
  planTraining: 'torchscan.planTraining',
  compareReport: 'torchscan.compareReport',
} as const;
