# The two entry points of README.md: `make demo` and `make test`.
VENV := .venv/bin

.PHONY: setup demo test bench
setup:
	bash scripts/setup.sh

demo: setup
	$(VENV)/spd-lsp complete --file examples/demo_prefix.py -k 3 --max-tokens 10

test: setup
	$(VENV)/python -m pip install -q -e ".[ray]"  # the optional extra's tests run too
	$(VENV)/lint-imports  # the layers and forbidden imports of pyproject.toml [tool.importlinter]
	bash scripts/install-arm64-cross.sh  # the kernels compiled for arm64 (tests/engine/test_portable_builds.py)
	bash scripts/test-vscode.sh  # first: it packages the .vsix that tests/editors/test_vscode_e2e.py installs
	SPD_REQUIRE_VSCODE_E2E=1 SPD_REQUIRE_ARM64_CROSS=1 $(VENV)/python -m pytest -q -p no:cacheprovider

bench: setup
	$(VENV)/python bench/bench_decoding.py
