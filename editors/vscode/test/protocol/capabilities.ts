/**
 * The client capabilities that matter to torchscan-lsp, as VS Code 1.91 with
 * vscode-languageclient 9 announces them: markdown hovers, resolvable inlay hints, code lenses
 * with refresh, pulled diagnostics with refresh, settings pulls and progress.
 */
import { ClientCapabilities } from 'vscode-languageserver-protocol/node';

export function clientCapabilities(): ClientCapabilities {
  return {
    general: { positionEncodings: ['utf-16'] },
    window: { workDoneProgress: true, showMessage: {}, showDocument: { support: true } },
    workspace: {
      configuration: true,
      workspaceFolders: true,
      didChangeConfiguration: { dynamicRegistration: true },
      executeCommand: { dynamicRegistration: true },
      inlayHint: { refreshSupport: true },
      codeLens: { refreshSupport: true },
      diagnostics: { refreshSupport: true },
    },
    textDocument: {
      synchronization: { dynamicRegistration: true, didSave: true, willSave: true, willSaveWaitUntil: true },
      hover: { dynamicRegistration: true, contentFormat: ['markdown', 'plaintext'] },
      codeLens: { dynamicRegistration: true },
      inlayHint: {
        dynamicRegistration: true,
        resolveSupport: { properties: ['tooltip', 'textEdits', 'label.tooltip', 'label.location', 'label.command'] },
      },
      publishDiagnostics: {
        relatedInformation: true,
        versionSupport: false,
        tagSupport: { valueSet: [1, 2] },
        codeDescriptionSupport: true,
        dataSupport: true,
      },
      diagnostic: { dynamicRegistration: true, relatedDocumentSupport: false },
    },
  };
}
