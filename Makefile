# pstrain - one top-level Makefile.
#   make          install missing packages, build bin/pstrain and the library
#   make test     build the tests too, then run every test; last line
#                 "N passed, N failed"
#   make test-under-load   the same while busy loops keep every core busy
#                 (tests/load.sh; HOGS=2)
#   make test-loop N=5 TESTS="ring_test dash_test"   chosen test programs N
#                 times, and how often each case failed (tests/run.sh)
#   make demo     build, then run the demonstration job
#   make bench    pstrain against baselines timed in the same run
#                 (bench/run.sh, docs/PERFORMANCE.md)
#   make asan     unit tests and pstrain under AddressSanitizer and UBSan
#   make fuzz     libFuzzer over the decoder and the request handler
#                 (clang), FUZZ_SECONDS (60) each, from tests/fuzz/corpus
#   make lib      build/lib/libpstrain.a and libpstrain.so
#   make install  the library, pstrain.h, pstrain.pc, the Python binding
#                 and bin/pstrain under PREFIX (/usr/local)
#   make format   clang-format every source file
#   make clean
CC ?= cc
PKGS = msgpack openblas jansson
# Includes name their folder ("common/err.h", "ps/policy.h"); only the
# public header is included by its installed name, "pstrain.h".
CPPFLAGS = -I. -Iinclude -D_GNU_SOURCE \
	$(shell pkg-config --cflags $(PKGS) 2>/dev/null)
CFLAGS ?= -O3 -g
# Results do not depend on these: no floating-point reassociation (sync
# stays bit-for-bit); -fno-math-errno lets sqrtf vectorize.
CFLAGS += -fno-math-errno
CFLAGS += -std=c11 -Wall -Wextra -Werror -MMD -MP -pthread
LDLIBS = -lnng -lmbedcrypto $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lz -lm -pthread
# The dashboard serves Debian's Chart.js (libjs-chart.js) from this file.
CHARTJS ?= /usr/share/javascript/chart.js/chart.min.js
CPPFLAGS += -DPT_CHARTJS='"$(CHARTJS)"'
SAN = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# The library (pstrain.h) is common/, ps/, client/ and model/; the pstrain
# program is cli/ and its trainer, train/, over it. train/ is not in the
# library: no call of pstrain.h reaches it (pt_net is model/'s), and a
# program that trains its own model brings its own loop. Tests link the
# objects directly, internals and all.
CORE_SRC = $(wildcard common/*.c ps/*.c client/*.c model/*.c)
# build/web.c: the dashboard's page (cli/dash/web/), compiled into pstrain.
CLI_SRC = $(filter-out cli/main.c,$(wildcard cli/*.c cli/*/*.c)) \
	$(wildcard train/*.c) build/web.c
LIB_SRC = $(CORE_SRC) $(CLI_SRC)
UNIT_SRC = $(filter-out tests/proc_%,$(wildcard tests/*_test.c))
PROC_SRC = $(wildcard tests/proc_*.c)
UNIT_NAMES = $(basename $(notdir $(UNIT_SRC)))

OBJ = build/obj
AOBJ = build/asan/obj
LIB_OBJ = $(LIB_SRC:%.c=$(OBJ)/%.o)
ALIB_OBJ = $(LIB_SRC:%.c=$(AOBJ)/%.o)
UNIT_BIN = $(UNIT_NAMES:%=build/tests/%)
AUNIT_BIN = $(UNIT_NAMES:%=build/asan/tests/%)
PROC_BIN = $(PROC_SRC:tests/%.c=build/tests/%)

.PHONY: all build test-build test-ready deps deps-test test test-under-load \
	test-loop demo \
	asan clean format bench bench-build fuzz fuzz-build fuzz-seeds lib \
	install FORCE
all: deps
	@$(MAKE) --no-print-directory build

build: bin/pstrain lib

# What make test runs: the tests, the ASan copies, the benches' programs
# and the fuzzers (clang; tests/fuzz_test.sh).
test-build: build $(UNIT_BIN) $(PROC_BIN) build/tests/pstrain \
	build/asan/pstrain $(AUNIT_BIN) \
	build/asan/bench/solo build/bench/comm build/bench/solo \
	build/bench/split build/bench/ring build/bench/rows \
	build/bench/ctrdump $(FUZZ_BIN)

# make test compiles on every core (the results do not depend on it).
JOBS ?= $(shell nproc 2>/dev/null || echo 1)

deps:
	@sh scripts/deps.sh

# What only the tests and the fuzzers need besides (scripts/deps.sh).
deps-test:
	@sh scripts/deps.sh --test

# bin/pstrain: the commands, linked with the static library.
bin/pstrain: $(OBJ)/cli/main.o $(CLI_SRC:%.c=$(OBJ)/%.o) build/lib/libpstrain.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# The library: position-independent objects with only pstrain.h's PT_API
# symbols visible from the shared object, as nng does with NNG_DECL.
PIC = build/pic/obj
PIC_OBJ = $(CORE_SRC:%.c=$(PIC)/%.o)
SONAME = libpstrain.so.1
PREFIX ?= /usr/local
VERSION_NUM = 0.11.0
# The interpreter whose pip installs the Python package (make install).
PYTHON = python3

$(PIC)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

$(PIC)/client/api.o $(PIC)/common/job.o: include/pstrain.h

build/lib/libpstrain.a: $(PIC_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

build/lib/$(SONAME): $(PIC_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined \
		-o $@ $^ $(LDLIBS)

build/lib/libpstrain.so: build/lib/$(SONAME)
	ln -sf $(SONAME) $@

lib: build/lib/libpstrain.a build/lib/libpstrain.so

# pstrain.pc is written for PREFIX as it installs; Libs.private are what
# a static link needs.
install: lib bin/pstrain
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig \
		$(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/python3/dist-packages
	install -m 644 include/pstrain.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 build/lib/libpstrain.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 build/lib/$(SONAME) $(DESTDIR)$(PREFIX)/lib/
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libpstrain.so
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' \
		'includedir=$${prefix}/include' '' 'Name: pstrain' \
		'Description: parameter-server training: sync, async and ssp over nng' \
		'Version: $(VERSION_NUM)' 'Libs: -L$${libdir} -lpstrain' \
		'Libs.private: $(LDLIBS)' 'Cflags: -I$${includedir}' \
		>$(DESTDIR)$(PREFIX)/lib/pkgconfig/pstrain.pc
	install -m 755 bin/pstrain $(DESTDIR)$(PREFIX)/bin/
	$(PYTHON) -m pip install --quiet --no-deps --no-index --upgrade \
		--root-user-action=ignore \
		--target $(DESTDIR)$(PREFIX)/lib/python3/dist-packages ./python

# The page's files as C arrays (no xxd needed: od and sed).
WEB = $(sort $(wildcard cli/dash/web/*))
build/web.c: $(WEB) scripts/embed.sh
	@mkdir -p $(@D)
	sh scripts/embed.sh $@ $(WEB)

build/asan/pstrain: $(AOBJ)/cli/main.o $(ALIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

# pstrain with the test hooks, for the tests that inject faults.
build/tests/pstrain: $(OBJ)/cli/main.o $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

build/tests/%: $(OBJ)/tests/%.o $(OBJ)/tests/test.o $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# bench/solo under ASan: tests/prefetch_test.sh.
build/asan/bench/solo: $(AOBJ)/bench/solo.o $(ALIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

build/asan/tests/%: $(AOBJ)/tests/%.o $(AOBJ)/tests/test.o $(ALIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(LDLIBS)

# build/version.h: `git describe` at build time, for `pstrain --version`
# and every run's record; rewritten only when it changes, so that a new
# commit rebuilds what includes it and nothing else.
build/version.h: FORCE
	@mkdir -p $(@D)
	@v=$$(git describe --always --dirty --tags 2>/dev/null || echo unknown); \
	printf '#define PT_VERSION "%s"\n' "$$v" >$@.tmp; \
	cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
FORCE:

$(OBJ)/common/version.o $(AOBJ)/common/version.o $(PIC)/common/version.o: \
	build/version.h

$(OBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(AOBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SAN) -c -o $@ $<

# The core as the tests link it (build/obj, build/asan) has the test
# hooks (common/testhook.h); the library (build/pic) and bin/pstrain have
# none.
$(CORE_SRC:%.c=$(OBJ)/%.o) $(CORE_SRC:%.c=$(AOBJ)/%.o): \
	CPPFLAGS += -DPT_TEST_HOOKS

# make bench: bench/run.sh times pstrain against baselines it builds:
# raw nng round trips of the same bytes (bench/comm.c, through pstrain.h
# only), the same model trained in one process (bench/solo.c), and
# PyTorch, alone, as DDP and through pstrain.torch (bench/torch_ref.py,
# python3-torch installed; the bridge loads build/lib).
bench-build: bin/pstrain lib build/bench/comm build/bench/solo build/bench/split \
	build/bench/ring build/bench/rows build/bench/ctrdump

build/bench/comm: bench/comm.c bench/bench.h include/pstrain.h build/lib/libpstrain.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -I. -Iinclude -o $@ bench/comm.c build/lib/libpstrain.a $(LDLIBS)

# bench/rows.c: a table's rows through one server against raw nng.
build/bench/rows: bench/rows.c bench/bench.h include/pstrain.h build/lib/libpstrain.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -D_GNU_SOURCE -I. -Iinclude -o $@ bench/rows.c build/lib/libpstrain.a $(LDLIBS)

build/bench/solo: $(OBJ)/bench/solo.o $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# bench/ring.c: the ring all-reduce alone against raw nng (internals).
build/bench/ring: $(OBJ)/bench/ring.o $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# bench/ctrdump.c: --data ctr's training set, for bench/torch_sparse.py.
build/bench/ctrdump: $(OBJ)/bench/ctrdump.o $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

build/bench/split: $(OBJ)/bench/split.o $(OBJ)/common/blas.o $(OBJ)/common/err.o
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

bench:
	@sh scripts/deps.sh python3-torch
	@$(MAKE) --no-print-directory bench-build
	@sh bench/run.sh

asan: deps
	@$(MAKE) --no-print-directory build/asan/pstrain $(AUNIT_BIN)

# test-ready: what the three test targets need, installed and built.
test-ready: deps-test
	@$(MAKE) --no-print-directory -j$(JOBS) test-build

test: test-ready
	@sh tests/run.sh

HOGS ?= 2
test-under-load: test-ready
	@HOGS=$(HOGS) sh tests/load.sh sh tests/run.sh

N ?= 5
test-loop: test-ready
	@sh tests/run.sh --loop $(N) $(TESTS)

demo: deps
	@$(MAKE) --no-print-directory bin/pstrain
	@sh scripts/demo.sh

# Fuzzing: the library built by clang with ASan, UBSan and libFuzzer's
# coverage; one harness per entry point (tests/fuzz/fuzz_*.c). New inputs
# go to build/fuzz/corpus, the kept seeds stay in tests/fuzz/corpus.
FUZZ_CC = clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS = -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined
FOBJ = build/fuzz/obj
FLIB_OBJ = $(LIB_SRC:%.c=$(FOBJ)/%.o)
FUZZ_NAMES = decode server
FUZZ_BIN = $(FUZZ_NAMES:%=build/fuzz/fuzz_%)

$(FOBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) -std=c11 -Wall -Wextra -Werror \
		-MMD -MP -pthread $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link \
		-c -o $@ $<

build/fuzz/fuzz_%: $(FOBJ)/tests/fuzz/fuzz_%.o $(FLIB_OBJ)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

build/fuzz/seeds: $(OBJ)/tests/fuzz/seeds.o $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)


fuzz-build: $(FUZZ_BIN)

fuzz: deps-test
	@$(MAKE) --no-print-directory fuzz-build
	@for f in $(FUZZ_NAMES); do \
		mkdir -p build/fuzz/corpus/$$f; \
		build/fuzz/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) -close_fd_mask=2 \
			build/fuzz/corpus/$$f tests/fuzz/corpus/$$f || exit 1; \
	done

# Rewrites the kept seeds (tests/fuzz/seeds.c says what they are).
fuzz-seeds: build/fuzz/seeds
	@mkdir -p tests/fuzz/corpus/decode tests/fuzz/corpus/server
	build/fuzz/seeds tests/fuzz/corpus

format:
	clang-format -i $(wildcard */*.c */*.h cli/*/*.c cli/*/*.h)

clean:
	rm -rf build bin

.SECONDARY:
-include $(shell find build -name '*.d' 2>/dev/null)
