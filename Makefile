# The two entry points of README.md: `make demo` and `make test`.
VENV := .venv/bin
PREFIX ?= import os\n\ndef list_python_files(root):\n    \"\"\"Return every .py file below root.\"\"\"\n    result = []\n    for dirpath, dirnames, filenames in os.walk(root):\n        for name in filenames:\n

.PHONY: setup demo test bench
setup:
	bash scripts/setup.sh

demo: setup
	printf '$(PREFIX)' | $(VENV)/spd-lsp complete --method superposed -k 3 --max-tokens 10 --multiline

test: setup
	$(VENV)/python -m pytest -q -p no:cacheprovider

bench: setup
	$(VENV)/python bench/bench_decoding.py
