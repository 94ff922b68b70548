"""The VS Code extension (editors/vscode): type-check, unit tests, bundle, .vsix package, and the
protocol-level test that drives the real server as VS Code's client library would.

Each step is the extension's own npm script; node_modules come from the committed lockfile
(``npm ci``, run by scripts/install-test-tools.sh).
"""

import json
import os
import subprocess
import sys
import zipfile

import pytest

from editor_workspace import REPO, require_tool

EXTENSION = REPO / "editors" / "vscode"


@pytest.fixture(scope="module")
def npm():
    """Runs one npm script of the extension and returns its output; fails with the output."""
    executable = require_tool("npm", "node 20 and npm build the VS Code extension")
    if not (EXTENSION / "node_modules").is_dir():
        pytest.fail("editors/vscode/node_modules is missing: run `bash scripts/install-test-tools.sh` (npm ci)")

    def run(script: str, **env: str) -> str:
        result = subprocess.run([executable, "run", script], cwd=EXTENSION, env={**os.environ, **env},
                                capture_output=True, text=True, timeout=300)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"npm run {script} failed:\n{output}"
        return output

    return run


# Each locked package whose `engines.node` excludes the running node, by npm's own semver rules.
ENGINE_CHECK = """
const semver = require('semver');
const lock = require('./package-lock.json');
const refused = Object.entries(lock.packages)
  .filter(([name, info]) => name && typeof info.engines?.node === 'string' && !semver.satisfies(process.version, info.engines.node))
  .map(([name, info]) => `${name} wants node ${info.engines.node}`);
console.log(JSON.stringify(refused));
"""


def test_every_locked_package_runs_on_this_node(npm):
    # `npm ci` warns (EBADENGINE) for each of these: the docs promise node 20
    node = require_tool("node", "node 20 builds the VS Code extension")
    result = subprocess.run([node, "-e", ENGINE_CHECK], cwd=EXTENSION, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_type_check(npm):
    npm("check")


def test_unit_tests(npm):
    output = npm("test")
    assert " passed" in output and " failed" not in output


def test_bundle(npm):
    npm("build")
    bundle = (EXTENSION / "dist" / "extension.js").read_text()
    # vscode-languageclient is bundled in; the editor provides `vscode` itself.
    assert 'require("vscode")' in bundle
    assert "vscode-languageclient" not in "".join(line for line in bundle.splitlines() if "require(" in line)


def test_package_is_an_installable_vsix(npm):
    npm("package")
    with zipfile.ZipFile(EXTENSION / "dist" / "torchscan-lsp.vsix") as vsix:
        names = set(vsix.namelist())
        manifest = json.loads(vsix.read("extension/package.json"))
    assert {"extension.vsixmanifest", "extension/package.json", "extension/dist/extension.js"} <= names
    assert not [name for name in names if "node_modules" in name or name.startswith("extension/src/")]
    assert manifest["main"] == "./dist/extension.js"
    titles = {command["title"] for command in manifest["contributes"]["commands"]}
    assert titles == {"Re-analyse", "Show report", "Measure latency", "Measure memory", "Measure training step", "Plan training",
                      "Restart server", "Show log"}
    assert manifest["capabilities"]["untrustedWorkspaces"]["supported"] == "limited"


def test_protocol_against_the_real_server(npm):
    output = npm("test:protocol", TORCHSCAN_PYTHON=sys.executable)
    assert "4 passed" in output
