/**
 * Stands in for vscode-languageclient/node in unit tests: records each client created and can
 * make `start` fail the way it does when the server process exits during initialize.
 */

export const control = {
  created: [] as LanguageClient[],
  startError: undefined as Error | undefined,
  reset(): void {
    this.created.length = 0;
    this.startError = undefined;
  },
};

export const State = { Stopped: 1, Running: 2, Starting: 3 } as const;
export const CloseAction = { DoNotRestart: 1, Restart: 2 } as const;
export const ErrorAction = { Continue: 1, Shutdown: 2 } as const;
export const RevealOutputChannelOn = { Debug: 0, Info: 1, Warn: 2, Error: 3, Never: 4 } as const;

export class LanguageClient {
  state: number = State.Stopped;

  constructor(
    readonly id: string,
    readonly name: string,
    readonly serverOptions: unknown,
    readonly clientOptions: { initializationOptions?: unknown; documentSelector?: unknown },
  ) {
    control.created.push(this);
  }

  onNotification(): void {}

  error(): void {}

  async start(): Promise<void> {
    if (control.startError) {
      throw control.startError;
    }
    this.state = State.Running;
  }

  async stop(): Promise<void> {
    this.state = State.Stopped;
  }
}
