# make          build target/release/libshim.so and target/release/shimlog
# make demo     build, run the bundled workload under the shim, show what its log says
# make test     every test (unit, property, integration with real programs); installs what
#               they need first (tools/test-deps.sh), fails on any test that could not run
# make check    the fast tier (under 5 minutes): unit, property and a handful of integration tests
# make budget   the instruction budgets alone (itest/budgets.json; valgrind), also part of make test
# make ownalloc the programs that bring their own allocator (target/ownalloc/bin), for the tests
# make bench    the benchmarks; rewrites BENCHMARKS.md and bench/results.json
# make install PREFIX=DIR   bin/shimlog, lib/libshim.so, man pages, bash/zsh/fish completions under DIR
# make dist     the same tree as one relocatable tarball: target/dist/shim-VERSION-x86_64-linux.tar.gz

SHELL   := /bin/bash
CARGO   ?= cargo
REL     := target/release
SHIM    := $(REL)/libshim.so
SHIMLOG := $(REL)/shimlog
DEMO    := target/demo
BACKEND ?= jemalloc

# Programs that bring their own allocator (itest/tests/own_allocator.rs, the demo): the
# validator workload in three builds (its own cargo workspace, never the main one) and the C/C++
# programs of itest/programs/ownalloc. A cold build takes a few minutes (jemalloc twice); then cached.
OWN      := target/ownalloc
OWNBIN   := $(OWN)/bin
VALIDATOR_SRC := workloads/validator/Cargo.toml workloads/validator/Cargo.lock $(wildcard workloads/validator/src/*.rs)
# A Rust program that reads jemalloc's statistics with tikv-jemalloc-ctl (its own workspace too).
JECTL_SRC := workloads/jectl/Cargo.toml workloads/jectl/Cargo.lock $(wildcard workloads/jectl/src/*.rs) workloads/common/burst.rs
# And one that reads mimalloc's (mi_process_info, mi_stats_print_out) on the mimalloc crate.
MISTATS_SRC := workloads/mistats/Cargo.toml workloads/mistats/Cargo.lock $(wildcard workloads/mistats/src/*.rs) workloads/common/burst.rs
# Arguments of the validator in `make demo`: ITERATIONS THREADS.
DEMO_VALIDATOR_ARGS ?= 60000 4

.PHONY: all build deps demo test check budget bench clean ownalloc install install-built dist dist-built

all: build

build:
	$(CARGO) build --release -p shim -p shimlog

$(DEMO)/demo: workloads/demo.c
	@mkdir -p $(DEMO)
	cc -O2 -g -pthread -o $@ $<

# One cargo build at a time in the validator's target dir (the features differ, the output
# path does not), and each copy checked to be the build it is named after.
define validator_build
	@mkdir -p $(OWNBIN)
	flock $(OWN)/cargo.lock sh -c '$(CARGO) build --release --manifest-path workloads/validator/Cargo.toml \
	  --target-dir $(OWN)/cargo --no-default-features --features "$(1)" && \
	  cp $(OWN)/cargo/release/validator $@.tmp'
	test "$$($@.tmp --which)" = $(2) && mv $@.tmp $@
endef

$(OWNBIN)/validator-je: $(VALIDATOR_SRC)
	$(call validator_build,je-unprefixed,jemalloc-unprefixed)

$(OWNBIN)/validator-rjem: $(VALIDATOR_SRC)
	$(call validator_build,je-prefixed,jemalloc-prefixed)

$(OWNBIN)/validator-mi: $(VALIDATOR_SRC)
	$(call validator_build,mimalloc,mimalloc)

# The same program on the C library's malloc, which LD_PRELOAD reaches: make bench compares
# what recording costs there with what it costs on the program's own jemalloc.
$(OWNBIN)/validator-sys: $(VALIDATOR_SRC)
	$(call validator_build,,system)

# A small Rust program of its own workspace, built into $(OWNBIN): $(call own_crate,NAME).
define own_crate
	@mkdir -p $(OWNBIN)
	flock $(OWN)/cargo.lock sh -c '$(CARGO) build --release --manifest-path workloads/$(1)/Cargo.toml \
	  --target-dir $(OWN)/cargo && cp $(OWN)/cargo/release/$(1) $@.tmp'
	mv $@.tmp $@
endef

$(OWNBIN)/jectl: $(JECTL_SRC)
	$(call own_crate,jectl)

$(OWNBIN)/mistats: $(MISTATS_SRC)
	$(call own_crate,mistats)

ownalloc: $(OWNBIN)/validator-je $(OWNBIN)/validator-rjem $(OWNBIN)/validator-mi $(OWNBIN)/validator-sys $(OWNBIN)/jectl $(OWNBIN)/mistats
	bash itest/programs/ownalloc/build.sh

demo: build $(DEMO)/demo $(OWNBIN)/validator-je
	@rm -f $(DEMO)/demo.*.shimlog
	@echo "== running workloads/demo.c under the shim (SHIM_BACKEND=$(BACKEND))"
	LD_PRELOAD=$(CURDIR)/$(SHIM) SHIM_BACKEND=$(BACKEND) SHIM_LOG=$(CURDIR)/$(DEMO)/demo.%p.shimlog $(DEMO)/demo
	@echo "== shimlog stats"
	$(SHIMLOG) stats $(DEMO)/demo.*.shimlog
	@echo "== shimlog replay (the same log against every backend)"
	$(SHIMLOG) replay $(DEMO)/demo.*.shimlog
	@rm -f $(DEMO)/validator.*.shimlog
	@echo "== running workloads/validator (Rust, its own unprefixed jemalloc linked in) under the shim:"
	@echo "   SHIM_BACKEND unset, so it keeps its own allocator, every call recorded"
	env -u SHIM_BACKEND LD_PRELOAD=$(CURDIR)/$(SHIM) SHIM_LOG=$(CURDIR)/$(DEMO)/validator.%p.shimlog \
	  $(OWNBIN)/validator-je $(DEMO_VALIDATOR_ARGS)
	@echo "== shimlog stats"
	$(SHIMLOG) stats $(DEMO)/validator.*.shimlog
	@echo "== shimlog replay"
	$(SHIMLOG) replay $(DEMO)/validator.*.shimlog
	@echo "== shimlog report (the demo's log, replayed too): open it in a browser"
	$(SHIMLOG) report $(DEMO)/demo.*.shimlog --replay -o $(DEMO)/report.html

# Unit and property tests build in the dev profile; the integration tests (itest/, the
# shimlog tests) run the release libshim.so and shimlog, built first. The bench programs
# then run once briefly (no figures), to check they still work.
# First tools/test-deps.sh installs what the tests need (as root), or stops at once with one
# line naming what is missing. Then every test runs; a test that cannot run fails, naming what
# it lacks, except where the environment cannot provide it (no cgroup to make, no right to
# mount: itest::skip), which is a skip. The tally (tools/tally.sh) counts passed, failed and
# skipped, and fails on any skip whose kind SHIM_TEST_EXPECTED_SKIPS (comma-separated:
# cgroup, mount, root, repo) does not name. docs/testing.md.
SKIPLOG := target/test-skips.log
export SHIM_TEST_SKIP_LOG := $(CURDIR)/$(SKIPLOG)

deps:
	@bash tools/test-deps.sh

test: deps
	@$(MAKE) --no-print-directory build ownalloc
	@rm -f $(SKIPLOG)
	@set -o pipefail; c=0; s=0; \
	  $(CARGO) test --workspace --no-fail-fast 2>&1 | tee target/test.log || c=$$?; \
	  bash bench/run.sh --smoke || s=$$?; \
	  bash tools/tally.sh target/test.log $(SKIPLOG) $$c $$s

# The fast tier, for work in progress: every crate's unit and property tests, shimlog's own
# tests, and the integration tests that cover each path of the shim once (C semantics under
# every backend, programs that bring their own allocator, recorded and switched, a crash and
# its recovery, the process tree of a shell). `make test` runs everything.
CHECK_ITESTS := c_semantics c_known own_allocator switched_native crash redis stats_tree
check: deps
	@$(MAKE) --no-print-directory build ownalloc
	@rm -f $(SKIPLOG)
	@set -o pipefail; c=0; \
	  { $(CARGO) test --workspace --exclude itest --no-fail-fast && \
	  $(CARGO) test -p itest --no-fail-fast $(addprefix --test ,$(CHECK_ITESTS)); } 2>&1 | tee target/check.log || c=$$?; \
	  bash tools/tally.sh target/check.log $(SKIPLOG) $$c

# The instruction budgets alone (make test runs them too, as the itest `budget`): callgrind's
# instructions per event of the shim's paths, shimlog stats and the replay against
# itest/budgets.json; fails naming any figure over its budget by more than 3%.
budget: build
	$(CARGO) test --release -p itest --test budget -- --nocapture

bench: build ownalloc
	bash bench/run.sh

clean:
	$(CARGO) clean

# Install and dist: shimlog finds libshim.so beside itself or in ../lib, so the tree works
# wherever it is put (shimlog record -- PROG). The man pages and completions are made by the
# installed shimlog from its own clap definitions (the hidden verb `shimlog generate`).
# install-built and dist-built take the binaries as they are (SHIM=..., SHIMLOG=...): the
# itest calls them with the ones it tests.
PREFIX   ?= /usr/local
VERSION  := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
DISTNAME := shim-$(VERSION)-x86_64-linux
DIST     ?= target/dist

# The tree under $(1). Debug info is stripped (the symbol tables and unwind tables stay).
define install_tree
	install -d $(1)/bin $(1)/lib $(1)/share/man/man1 $(1)/share/bash-completion/completions \
	  $(1)/share/zsh/site-functions $(1)/share/fish/vendor_completions.d
	install -m 0755 $(SHIMLOG) $(1)/bin/shimlog
	install -m 0755 $(SHIM) $(1)/lib/libshim.so
	strip --strip-debug $(1)/bin/shimlog $(1)/lib/libshim.so
	$(1)/bin/shimlog generate man $(1)/share/man/man1
	$(1)/bin/shimlog generate completions bash $(1)/share/bash-completion/completions
	$(1)/bin/shimlog generate completions zsh $(1)/share/zsh/site-functions
	$(1)/bin/shimlog generate completions fish $(1)/share/fish/vendor_completions.d
endef

install: build
	@$(MAKE) --no-print-directory install-built

install-built:
	$(call install_tree,$(DESTDIR)$(PREFIX))

dist: build
	@$(MAKE) --no-print-directory dist-built

dist-built:
	rm -rf $(DIST)/$(DISTNAME) $(DIST)/$(DISTNAME).tar.gz
	$(call install_tree,$(DIST)/$(DISTNAME))
	tar -C $(DIST) --owner=0 --group=0 -czf $(DIST)/$(DISTNAME).tar.gz $(DISTNAME)
	rm -rf $(DIST)/$(DISTNAME)
	@echo "$(DIST)/$(DISTNAME).tar.gz"
