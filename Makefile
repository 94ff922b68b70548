# Two commands do all set-up on a fresh machine:
#   make demo   install, then scan the example models in the terminal
#   make test   install (Python, the VS Code extension's node modules, editor test tools), then test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-tools bench peers clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first and pinned: a later unpinned requirement must never pull a CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[test,examples]'
	touch $@

setup: $(STAMP)

demo: setup
	$(BIN)/torchscan-lsp scan examples/cnn.py examples/transformer_models.py

test-tools: setup
	VENV=$(VENV) bash scripts/install-test-tools.sh

test: test-tools
	$(BIN)/python -m pytest -q -rs

# Each benchmark prints its ratios measured side by side in one run; none of them is a test.
bench: setup
	set -e; for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f; done

# The peers benchmarks/peers.py compares against, in an environment of their own (never a
# dependency): torch pinned first, then every other requirement constrained to that torch.
PEERS ?= .peers
PEERS_STAMP := $(PEERS)/.installed

$(PEERS_STAMP): pyproject.toml
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/pip install -q torch==2.13.0
	echo torch==2.13.0 > $(PEERS)/constraints.txt
	$(PEERS)/bin/pip install -q -c $(PEERS)/constraints.txt torchscan==0.2.0 torchinfo thop fvcore 'transformers>=4.40'
	$(PEERS)/bin/pip install -q -c $(PEERS)/constraints.txt -e .
	touch $@

peers: $(PEERS_STAMP)

clean:
	rm -rf $(VENV) $(PEERS) editors/vscode/node_modules .tools tests/editors/vscode_real/node_modules build/vscode-real
