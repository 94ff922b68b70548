#!/usr/bin/env bash
# Installs what the default test run needs beyond the Python venv: the VS Code extension's node
# modules (from the committed lockfile) and, when run as root, Debian's emacs/eglot and chromium
# for the editor and HTML tests. Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -f editors/vscode/package-lock.json ] && [ ! -d editors/vscode/node_modules ]; then
  (cd editors/vscode && npm ci --no-audit --no-fund --loglevel=error)
fi

missing=()
command -v emacs >/dev/null 2>&1 || missing+=(emacs-nox elpa-eglot)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "note: not root, so ${missing[*]} were not installed; the tests that need them will say so" >&2
  fi
fi
