# make          build target/release/libshim.so and target/release/shimlog
# make demo     build, run the bundled workload under the shim, show what its log says
# make test     every test (unit, property, integration with real programs)
# make bench    the benchmarks; rewrites BENCHMARKS.md and bench/results.json

SHELL   := /bin/bash
CARGO   ?= cargo
REL     := target/release
SHIM    := $(REL)/libshim.so
SHIMLOG := $(REL)/shimlog
DEMO    := target/demo
BACKEND ?= jemalloc

.PHONY: all build demo test bench clean

all: build

build:
	$(CARGO) build --release -p shim -p shimlog

$(DEMO)/demo: workloads/demo.c
	@mkdir -p $(DEMO)
	cc -O2 -g -pthread -o $@ $<

demo: build $(DEMO)/demo
	@rm -f $(DEMO)/demo.*.shimlog
	@echo "== running workloads/demo.c under the shim (SHIM_BACKEND=$(BACKEND))"
	LD_PRELOAD=$(CURDIR)/$(SHIM) SHIM_BACKEND=$(BACKEND) SHIM_LOG=$(CURDIR)/$(DEMO)/demo.%p.shimlog $(DEMO)/demo
	@echo "== shimlog stats"
	$(SHIMLOG) stats $(DEMO)/demo.*.shimlog
	@echo "== shimlog replay (the same log against every backend)"
	$(SHIMLOG) replay $(DEMO)/demo.*.shimlog

# Unit and property tests build in the dev profile; the integration tests (itest/, the
# shimlog tests) run the release libshim.so and shimlog, built first. The bench programs
# then run once briefly (no figures), to check they still work.
test: build
	set -o pipefail; $(CARGO) test --workspace --no-fail-fast 2>&1 | tee target/test.log
	bash bench/run.sh --smoke
	@awk '/^test result:/ { p += $$4; f += $$6 } END { printf "%d passed, %d failed\n", p, f }' target/test.log

bench: build
	bash bench/run.sh

clean:
	$(CARGO) clean
