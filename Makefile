# Attention, from lookup to Transformer -- every command a learner, instructor or reader needs.
# Each target bootstraps .venv from the pinned constraints.txt the first time, and does no
# work the second time that it need not do (make's own dependency tracking, plus stamp files).

SHELL := /bin/bash
# A recipe that fails leaves no target behind to pass for done: Sphinx writes the book's index.html
# before the build reports a lesson that raised, and the next make would take it as built.
.DELETE_ON_ERROR:
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# nbgrader runs `alembic` (and the kernel) from PATH: the environment's tools come first.
export PATH := $(abspath $(VENV))/bin:$(PATH)
# PyTorch's, MKL's and oneDNN's AVX2 kernels on every x86-64 machine, so that lessons print the
# numbers their text quotes (coursekit/course/numerics.py says why; a test checks the two agree).
ifeq ($(shell uname -m),x86_64)
export ATEN_CPU_CAPABILITY ?= avx2
export MKL_CBWR ?= AVX2
export ONEDNN_MAX_CPU_ISA ?= AVX2
endif
LESSON ?=
# EDITION=student builds the book without any solution code (for graded courses).
EDITION ?= solutions
MATHJAX_VERSION := 3.2.2
MATHJAX := build/mathjax/mathjax/tex-mml-chtml.js
# axe-core checks the built book's accessibility in the browser tests (WCAG 2 A and AA).
AXE_VERSION := 4.14.1
AXE := build/axe-core/axe.min.js
# The repository the book is published from: its lesson pages then link to Colab and Binder and
# its set-up text to `git clone`, e.g. make book BOOK_REPOSITORY=https://github.com/ORG/REPO.
# Without it the book offers the student notebooks as downloads and names no address at all.
BOOK_REPOSITORY ?=
BOOK_BRANCH ?= main

LESSON_SOURCES := $(wildcard solutions/lesson*/*.md)
# notebooks/<lesson>/<name>.ipynb is generated from solutions/<lesson>/<name>.md
STUDENT_NOTEBOOKS := $(patsubst solutions/%.md,notebooks/%.ipynb,$(LESSON_SOURCES))
# What a built page depends on: the lessons import the library; these tools make the pages.
LIBRARY := $(shell find solutions/attention_ref -name '*.py' 2>/dev/null)
BOOK_TOOLS := $(wildcard coursekit/publishing/book.py coursekit/publishing/sphinx_*.py) \
    coursekit/course/sources.py coursekit/course/reading.py coursekit/course/lessons.py
BOOK_PAGES := $(wildcard book/*.md book/*.yml book/*.bib book/_assets/*)
BOOK_INDEX := book/_build/$(EDITION)/_build/html/index.html
# The settings a book was built with, rewritten only when they change: a new address rebuilds
# the book, the same one leaves make nothing to do (a phony prerequisite would always rebuild).
BOOK_SETTINGS := build/book-settings/$(EDITION)
$(shell mkdir -p $(dir $(BOOK_SETTINGS)) && printf '%s\n' '$(BOOK_REPOSITORY)' '$(BOOK_BRANCH)' \
    | cmp -s - $(BOOK_SETTINGS) || printf '%s\n' '$(BOOK_REPOSITORY)' '$(BOOK_BRANCH)' > $(BOOK_SETTINGS))

.PHONY: help install bytecode book bench bench-book versions lab check upgrade notebooks test test-fast lint test-mistakes mutants equivalents browser sandbox autograde accept grade-class feedback hub proxy classroom-env clean
.DEFAULT_GOAL := help

help:
	@echo "make book        build the Jupyter Book (every lesson executed) and print where it is"
	@echo "make test        run the whole test suite (lint, grading chain, reference library, book)"
	@echo "make test-fast   the contributors' tier (< 3 min): lint, reference, defences, one lesson graded"
	@echo "make lint        ruff: the style pyproject.toml declares (make test runs it first)"
	@echo "make lab         open JupyterLab on your own copy of the student notebooks (work/)"
	@echo "make check       grade your saved copies of the lessons you started, then sum up (LESSON=lesson01 for one)"
	@echo "make upgrade     carry your answers into a lesson's newer edition, keeping your file (LESSON=lesson01)"
	@echo "make test-mistakes  grade every planted mistake of every lesson (make test: a few each)"
	@echo "make mutants     mutation-test every graded exercise (LESSON=lesson01 for one)"
	@echo "make equivalents find each exercise's answer-equivalent callables (LESSON=lesson01 for one)"
	@echo "make notebooks   regenerate the student edition in notebooks/ from solutions/"
	@echo "make bench       the course's performance numbers: lessons, attention, memory, grading, GPU"
	@echo "make bench-book  time a full book build and a rebuild after editing one lesson"
	@echo "make versions    the course with the oldest and newest versions it promises, and as on Colab (GBs; not in make test)"
	@echo "make autograde LESSON=lesson01   instructors: grade submitted/*/LESSON (nbgrader on Dask: all cores or a cluster, report)"
	@echo "make sandbox     instructors: install bubblewrap, the OS sandbox every grading kernel runs in"
	@echo "make accept LESSON=lesson01 STUDENT=s  instructors: count a held submission's points after review"
	@echo "make feedback  LESSON=lesson01   instructors: write feedback/*/LESSON (after the due date)"
	@echo "make grade-class                 instructors: grade a synthetic class of 100 (CLASS=, LESSON=)"
	@echo "make hub         instructors, as root: JupyterHub for the class in classroom/ (HUB_PORT=8000)"

install: $(STAMP)

# constraints.txt is the resolved set. pip installs uv at its pin, and uv the rest: it unpacks and
# compiles on every core where pip uses one (50-65 s instead of 139 from nothing on 2 cores,
# 2026-11-27). uv reads none of pip's configuration, so the indexes and wheel folders pip is given
# here (pip.conf, PIP_* variables) are handed on, with pip's way of choosing among them (the best
# match on any index, not the first index that knows a name) and the system's certificates: both
# install from the same registries. --compile-bytecode: pip compiles what it installs,
# uv only when asked, and without bytecode every kernel would compile torch anew (read-only boxes,
# PYTHONDONTWRITEBYTECODE).
UV := $(VENV)/bin/uv
PIP_SOURCES := $(PY) -m pip config list \
    | sed -n "s/^[^.]*\.\(index-url\|extra-index-url\|find-links\)='\(.*\)'$$/\1 \2/p" \
    | awk '{ for (i = 2; i <= NF; i++) if (!seen[$$1 $$i]++) print "--" $$1 "=" $$i }'
# $(call install_extras,EXTRAS): the course with pyproject.toml's EXTRAS, at constraints.txt's pins.
# What a learner sees: a plain line or two and progress (coursekit/learner/install.py), not the
# commands.
define install_extras
	@test -x $(PY) || { echo "Setting up .venv, this course's own Python environment (once)."; \
	    $(PYTHON) -m venv $(VENV); }
	@$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt uv
	@sources=$$($(PIP_SOURCES)) && $(PY) -m coursekit.learner.install $(1) -- \
	    $(UV) pip install --python $(PY) --system-certs --index-strategy unsafe-best-match \
	    --compile-bytecode $$sources -c constraints.txt -e ".[$(1)]"
	@# uv, like pip, never removes what an older constraints.txt installed: uninstall what is no
	@# longer pinned. Names compared as PEP 503 normalizes them: pip freeze writes huggingface_hub
	@# where constraints.txt has huggingface-hub, and the two must not look like different packages.
	@$(PY) -m pip freeze --exclude-editable | sed 's/==.*//' | tr 'A-Z_.' 'a-z--' \
	    | grep -vxFf <(sed 's/[ =#].*//;/^$$/d' constraints.txt | tr 'A-Z_.' 'a-z--') \
	    | xargs -r $(UV) pip uninstall --quiet --python $(PY)
endef
ALL_EXTRAS := course,classroom,test
$(STAMP): pyproject.toml constraints.txt
	$(call install_extras,$(ALL_EXTRAS))
	@touch $@

# The learner's set, all that make lab, make check and make book need (pyproject.toml's `learner`
# extra): none of the test, hub, browser and class-grading tools. A .venv that holds the whole set
# holds it already.
LEARNER_STAMP := $(VENV)/.learner-stamp
$(LEARNER_STAMP): pyproject.toml constraints.txt
ifneq ($(shell test $(STAMP) -nt pyproject.toml && test $(STAMP) -nt constraints.txt && echo y),y)
	$(call install_extras,learner)
	@touch $@
else
	@# The whole set is there already: the stamp only saves this test next time. The class's grader
	@# account runs make in a room whose .venv it may not write, and needs no stamp to go on.
	@touch $@ 2>/dev/null || true
endif

# The course's own modules compiled to bytecode: pip compiles what it installs, not the editable
# course, and every grading kernel and nbgrader process imports it. Where PYTHONDONTWRITEBYTECODE is
# set (these machines), or a kernel's box is read-only, nothing would cache it: each import would
# compile it again. A stale file is ignored by Python, never wrong.
bytecode: | $(LEARNER_STAMP)
	@$(PY) -m compileall -q coursekit solutions/attention_ref >/dev/null 2>&1 \
	    || echo "bytecode: the course's modules cannot be compiled here (a read-only folder): slower imports"

# MathJax is served from the book itself (no CDN): fetched from the npm registry at build time,
# never committed. Only the combined script and its fonts are kept.
$(MATHJAX):
	@mkdir -p build/mathjax/mathjax
	cd build && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null
	tar -xzf build/mathjax-$(MATHJAX_VERSION).tgz -C build/mathjax/mathjax --strip-components=2 \
	    package/es5/tex-mml-chtml.js package/es5/output/chtml/fonts/woff-v2
	@rm -f build/mathjax-$(MATHJAX_VERSION).tgz
	@touch $@

# axe-core, like MathJax, from the npm registry at the pinned version, never committed.
$(AXE):
	@mkdir -p $(dir $(AXE))
	cd build && npm pack --silent axe-core@$(AXE_VERSION) >/dev/null
	tar -xzf build/axe-core-$(AXE_VERSION).tgz -C $(dir $(AXE)) --strip-components=1 package/axe.min.js
	@rm -f build/axe-core-$(AXE_VERSION).tgz
	@touch $@

book: $(BOOK_INDEX)
	@echo "The book is at $(abspath $(BOOK_INDEX))"

# The student notebooks are the lesson pages' downloads: a newer student edition rebuilds the book.
$(BOOK_INDEX): $(MATHJAX) $(LESSON_SOURCES) $(STUDENT_NOTEBOOKS) $(LIBRARY) $(BOOK_TOOLS) $(BOOK_PAGES) $(BOOK_SETTINGS) | $(LEARNER_STAMP)
	$(PY) -m coursekit.publishing.book --edition $(EDITION) \
	    $(if $(BOOK_REPOSITORY),--repository $(BOOK_REPOSITORY) --branch $(BOOK_BRANCH))
	@touch $@  # Sphinx leaves an unchanged page alone; make needs to see the build as done

# Numbers, not tests: each row next to its target. BENCH_FLAGS="--only attention,memory" for some.
BENCH_FLAGS ?=
bench: | $(STAMP)
	$(PY) -m coursekit.bench $(BENCH_FLAGS)

bench-book: $(MATHJAX) | $(STAMP)
	$(PY) -m coursekit.bench.book

# The range pyproject.toml promises, tested (coursekit/bench/versions.py): the reference tests and
# every lesson with the oldest versions it claims and the newest the registries serve, and every
# lesson as on Colab, each in its own environment in build/versions/. Downloads GBs (PyPI's
# PyTorch brings NVIDIA's libraries); not part of make test. VERSIONS_FLAGS="--sets oldest
# --lessons lesson12" narrows it; --reuse keeps the environments of the last run.
VERSIONS_FLAGS ?=
versions: | $(STAMP)
	$(PY) -m coursekit.bench.versions $(VERSIONS_FLAGS)

notebooks: $(STUDENT_NOTEBOOKS)

# After a clone make sees every source as newer than its notebook: a notebook that records its
# source's digest is only touched (coursekit/publishing/current.py), the others regenerated.
notebooks/%.ipynb: solutions/%.md | $(LEARNER_STAMP)
	@$(PY) -m coursekit.publishing.current $@ $< \
	    || $(PY) -m coursekit.publishing.release $(firstword $(subst /, ,$*))

# Extra flags for the Jupyter server (e.g. LAB_FLAGS="--no-browser --port 8899").
LAB_FLAGS ?=
# A Jupyter server refuses to run as root unless told (containers, CI machines).
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

# classroom/learner/ is the learner's JupyterLab, the same as on the class's hub: no formgrader,
# no course list, no Create Assignment panel, no news pop-up; classroom/solo-lab/ takes out what
# needs a class (the Assignment List, which needs the hub's exchange). Jupyter logs warnings only,
# so that the course's notices (workspace.py) stand right above the address to open.
# Lesson 11's kernels' builds are kept in .venv for the learner's next run of a test cell (the
# learner's own environment: make check's sandbox reads them, and nobody else's grading does).
# Kernels talk to the server over Unix sockets where their paths fit (no "running over TCP
# without encryption" per kernel), and a tab left open from an earlier start is one line, not a
# flood of 404s (coursekit/learner/lablog.py, classroom/solo-lab).
LAB_CONFIG := $(CURDIR)/classroom/solo-lab:$(CURDIR)/classroom/learner
lab: notebooks | $(LEARNER_STAMP)
	@$(PY) -m coursekit.learner.workspace
	@JUPYTER_CONFIG_PATH=$(LAB_CONFIG)$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH)) \
	    ATTENTION_REF_KEEP_BUILDS=1 $(VENV)/bin/jupyter lab --notebook-dir=work $(ROOT_FLAG) \
	    --ServerApp.log_level=WARN --LabApp.log_level=WARN \
	    $$($(PY) -m coursekit.learner.lablog) $(LAB_FLAGS)

check: $(LEARNER_STAMP) bytecode
	$(PY) -m coursekit.learner.selfcheck $(LESSON)

# A newer edition of a lesson you started: your answers carried into it, your file kept beside it.
upgrade: notebooks | $(LEARNER_STAMP)
	@$(PY) -m coursekit.learner.upgrade $(LESSON)

# The suites run side by side on TEST_WORKERS pytest-xdist workers, each suite on one worker with
# its one set-up (autograde_tests/conftest.py groups them): grading keeps both cores busy, the hub,
# browser and timeout tests mostly wait. One suite or one lesson: see docs/contributing.md.
TEST_WORKERS ?= 4
test: $(STAMP) bytecode browser sandbox proxy classroom-env lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

# The contributors' tier, what the issue of the fast tier lists: lint, the tests that need nothing
# but Python and the repository (unit: the layers, the grading defences, the course's checks), the
# reference library, grading failing closed, and the grading chain of one lesson with no planted
# mistakes -- nothing that installs packages, makes accounts, starts a hub, a Dask cluster or a
# browser, or builds the book (the markers in pyproject.toml say what each suite needs). The
# learner's `make check` of two lessons (40 CPU-seconds) and the synthetic classes graded after the
# deadline (marked synthetic_class: 160 CPU-seconds) are left to make test. FAST_LESSON is the
# cheapest lesson that exercises the whole chain (solved and student edition, feedback, export).
# Two workers on 2 cores: every suite here keeps a core busy, a third worker only adds its start.
FAST_LESSON ?= lesson01
FAST_WORKERS ?= 2
FAST_SELECTION := (unit or reference or chain) and not \
    (make or book or browser or hub or accounts or cluster or hostile or synthetic_class or bench)
FAST_LEFT_TO_MAKE_TEST := \
    autograde_tests/test_learner_tools.py::test_selfcheck_grades_the_learners_copy_without_showing_hidden_tests
test-fast: $(STAMP) bytecode lint
	COURSE_LESSONS=$(FAST_LESSON) COURSE_MISTAKES=none \
	    $(PY) -m pytest -n $(FAST_WORKERS) --dist loadgroup -m "$(FAST_SELECTION)" \
	    $(FAST_LEFT_TO_MAKE_TEST:%=--deselect %)

# The style pyproject.toml declares, enforced (ruff is pinned in constraints.txt like every package).
# `$(VENV)/bin/ruff format .` fixes the formatting.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Every planted mistake of every lesson through nbgrader (make test grades each lesson's EVERYDAY
# few), the lessons dealt to the workers. CI runs `COURSE_MISTAKES=all make test` instead: the same
# grading, once, beside the other suites.
test-mistakes: $(STAMP) bytecode sandbox
	COURSE_MISTAKES=all $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup autograde_tests/chain

# Mutation testing of the graded exercises (coursekit/mutants/): each answer changed in small
# ways, run against the tests it reaches in-process, the survivors printed for triage into
# solutions/LESSON/mutants.yml. MUTANTS_FLAGS="--cell softmax" for one exercise, "--list" to see
# the mutants, "--no-write" to leave mutants.yml alone. Minutes a lesson (docs/writing-lessons.md).
MUTANTS_FLAGS ?=
mutants: $(STAMP) bytecode
	$(PY) -m coursekit.mutants $(LESSON) $(MUTANTS_FLAGS)

# Each exercise's answer-equivalent callables (coursekit/mutants/equivalents.py): the notebook's
# and the library's functions that return its answer on its tests' inputs, found by running them,
# written to solutions/attention_ref/equivalents/LESSON.json (a test fails while one is stale).
equivalents: $(STAMP) bytecode
	$(PY) -m coursekit.mutants.equivalents $(LESSON) --write

# The browser tests need Debian's Chromium (Playwright's own browser download cannot work
# offline). Installed here when we are root with apt; otherwise those tests skip (fail under CI).
browser: $(AXE)
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "Chromium not found: the browser tests will skip (apt-get install chromium)"; fi; }

# Every grading kernel runs in bubblewrap (coursekit/grading/bwrap.py): installed here when we are
# root with apt, as Chromium is. Without it, grading refuses to start unless the instructor accepts
# the Python-only sandbox (GRADE_FLAGS=--python-only-sandbox); make check falls back with a notice.
sandbox:
	@command -v bwrap >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing bubblewrap for the grading sandbox"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else echo "bubblewrap not found: grading will refuse to start (apt-get install bubblewrap)"; fi; }

# nbgrader autograde in parallel batches, screening first, a per-student table and reports/LESSON/
# (coursekit/grading/classgrade.py). GRADE_FLAGS=--force regrades everything; --accept STUDENT releases a hold.
# --course: the folder this Makefile is in -- the repository, or the grader's copy of it on a hub
# (whose .venv links to the hub's environment, where coursekit is the repository's).
# The batches run on a Dask cluster on this machine, or on an existing one whose workers see the
# course folder: GRADE_FLAGS="--scheduler tcp://HOST:8786" (or DASK_SCHEDULER_ADDRESS in the environment).
GRADE_FLAGS ?=
autograde: $(STAMP) bytecode sandbox
	$(PY) -m coursekit.grading.classgrade $(or $(LESSON),$(error give LESSON=lessonNN)) \
	    --course $(CURDIR) $(GRADE_FLAGS)

# An instructor reviewed a held submission (reports/LESSON/review.md): count its points.
accept: $(STAMP)
	$(PY) -m coursekit.grading.classgrade $(or $(LESSON),$(error give LESSON=lessonNN)) \
	    --course $(CURDIR) --accept $(or $(STUDENT),$(error give STUDENT=<student id>))

# A synthetic class -- solved, blank, planted mistakes, broken and hostile submissions -- graded on
# all cores in a temporary course: the per-student table and notebooks per minute.
# (coursekit/democlass/). CLASS_FLAGS="--workers 1" and the like go to python -m coursekit.democlass;
# CLASS_FLAGS=--compare-sandboxes grades the class in bubblewrap and in the Python-only sandbox.
CLASS ?= 100
CLASS_FLAGS ?=
grade-class: $(STAMP) bytecode sandbox
	$(PY) -m coursekit.democlass $(or $(LESSON),lesson01) --students $(CLASS) $(CLASS_FLAGS)

# nbgrader generate_feedback, refused before the lesson's due date (and every extension) unless
# FEEDBACK_FLAGS=--before-due-date: feedback then shows the visible tests only
# (coursekit/grading/feedback.py). More flags go to nbgrader, e.g. FEEDBACK_FLAGS=--force.
FEEDBACK_FLAGS ?=
feedback: $(STAMP)
	$(PY) -m coursekit.grading.feedback $(or $(LESSON),$(error give LESSON=lessonNN)) \
	    --course $(CURDIR) $(FEEDBACK_FLAGS)

# A class on this server (as root): accounts from classroom/roster.csv, the grader's course
# folder, nbgrader's exchange, and JupyterHub on 127.0.0.1:$(HUB_PORT) until Ctrl+C
# (coursekit/classroom/). HUB_FLAGS="--shared-password demo" for a loopback demo;
# python -m coursekit.classroom remove --yes deletes the class again.
HUB_PORT ?= 8000
CLASS_VENV := build/classroom/venv
HUB_FLAGS ?=
hub: proxy $(CLASS_VENV)
	HUB_PORT=$(HUB_PORT) $(CLASS_VENV)/bin/python -m coursekit.classroom up $(HUB_FLAGS)

# The environment every account of the class can run (coursekit/classroom/environment.py): the
# project's .venv, with a copy of its interpreter where every account can reach it when the
# interpreter itself is out of their reach (pyenv under /root). patchelf relocates that copy.
classroom-env: $(CLASS_VENV)
$(CLASS_VENV): $(STAMP) coursekit/classroom/environment.py
	@command -v patchelf >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq patchelf >/dev/null; \
	  fi; }
	$(PY) -m coursekit.classroom.environment
	@touch $@

# JupyterHub's proxy from the npm registry, at the versions classroom/proxy/package-lock.json
# pins (as MathJax, it is fetched, never committed).
PROXY := build/proxy/node_modules/.bin/configurable-http-proxy
proxy: $(PROXY)
$(PROXY): classroom/proxy/package.json classroom/proxy/package-lock.json
	@mkdir -p build/proxy
	cp classroom/proxy/package.json classroom/proxy/package-lock.json build/proxy/
	cd build/proxy && npm ci --silent --no-audit --no-fund
	@touch $@

clean:
	rm -rf book/_build book/lessons build solutions/*/*.ipynb
