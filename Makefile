# ncf - Neural Collaborative Filtering as small Unix tools.
#
#   make            build the tools into build/bin (probes first, installs what is missing)
#   make demo       the whole pipeline on synthetic data
#   make check      tests (TAP, prove), then the unit tests under ASan+UBSan
#   make help       every target
#
# Variables: PREFIX DESTDIR CC CFLAGS NO_CUDA=1 NO_MPI=1 CUDA_HOME NVCC CUDA_ARCH

PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif
NO_CUDA ?= 0
NO_MPI ?= 0
OPT ?= -O3 -march=native
CFLAGS ?= $(OPT) -g
BUILD ?= build
.DEFAULT_GOAL := all

# --- configuration (probes) ----------------------------------------------------------------
CONFIG := $(BUILD)/config.mk
# Reconfigure when the switches change.
CONFIG_WANT := NO_CUDA=$(NO_CUDA) NO_MPI=$(NO_MPI) CC=$(CC)
CONFIG_STAMP := $(BUILD)/config.want
$(shell mkdir -p $(BUILD); [ "$$(cat $(CONFIG_STAMP) 2>/dev/null)" = "$(CONFIG_WANT)" ] || echo "$(CONFIG_WANT)" > $(CONFIG_STAMP))

$(CONFIG): scripts/configure.sh $(CONFIG_STAMP)
	@CC="$(CC)" NO_CUDA=$(NO_CUDA) NO_MPI=$(NO_MPI) sh scripts/configure.sh $@

# Goals that need no probing.
NOCONF_GOALS := clean help uninstall
ifneq ($(filter-out $(NOCONF_GOALS),$(or $(MAKECMDGOALS),all)),)
-include $(CONFIG)
endif

# --- flags ---------------------------------------------------------------------------------
WARN := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wstrict-prototypes
CPPFLAGS_NCF := -Icommon -Ikernels -Incf-prep -D_GNU_SOURCE
BASE_CFLAGS := -std=gnu11 -fopenmp -ffp-contract=off -fno-math-errno -fno-trapping-math $(WARN) -MMD -MP
LIBS := -lzstd -lcsv -lopenblas -lm -lpthread
ifeq ($(HAVE_MPI),1)
CPPFLAGS_NCF += -DNCF_HAVE_MPI $(MPI_CFLAGS)
LIBS += $(MPI_LIBS)
endif
# kernels/cuda/test_hooks.cu goes into the tests only, never into libncf.a.
CU_SRC := $(filter-out %/test_hooks.cu,$(wildcard kernels/cuda/*.cu))
CU_TEST_SRC := $(wildcard kernels/cuda/test_hooks.cu)
# The cuda backend is built when the probes find CUDA and its sources are here.
ifneq ($(wildcard kernels/cuda/backend.cu),)
BUILD_CUDA := $(HAVE_CUDA)
endif
ifeq ($(BUILD_CUDA),1)
CPPFLAGS_NCF += -DNCF_HAVE_CUDA -I$(CUDA_HOME)/include
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -lstdc++
ifeq ($(HAVE_NCCL),1)
CPPFLAGS_NCF += -DNCF_HAVE_NCCL
CUDA_LIBS += -lnccl
endif
LIBS += $(CUDA_LIBS)
endif
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	     -gencode arch=compute_90,code=compute_90
# -fmad=false: no contraction of a*b+c into FMAs, so that the formulas shared with the CPU
# (ncf_hd.h: Adam, dropout, the head) round as gcc's -ffp-contract=off does.
NVCCFLAGS ?= -O3 -std=c++17 $(CUDA_ARCH) -fmad=false -Xcompiler -fopenmp,-Wall -lineinfo

# --- sources -------------------------------------------------------------------------------
TOOLS := ncf-prep ncf-train ncf-eval ncf-infer
LIB_SRC := $(wildcard common/*.c) $(wildcard kernels/*.c kernels/cpu/*.c) \
	   $(filter-out ncf-prep/main.c,$(wildcard ncf-prep/*.c))
TOOL_BINS := $(foreach t,$(TOOLS),$(if $(wildcard $(t)/main.c),$(BUILD)/bin/$(t)))
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
ASAN_BINS := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/asan/tests/%)

# Rebuild when the flags change.
FLAGS_STAMP := $(BUILD)/flags.stamp
FLAGS_NOW := $(CC) $(CPPFLAGS_NCF) $(BASE_CFLAGS) $(CFLAGS) $(LIBS) $(NVCCFLAGS)
$(shell [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" = '$(FLAGS_NOW)' ] || echo '$(FLAGS_NOW)' > $(FLAGS_STAMP))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
ifeq ($(BUILD_CUDA),1)
LIB_OBJ += $(CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)
endif
ASAN_OBJ := $(LIB_SRC:%.c=$(BUILD)/asan/obj/%.o)
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

BENCH_SRC := $(wildcard bench/*.c)
BENCH_BINS := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
TESTTOOL_SRC := $(wildcard tests/tools/*.c)
TESTTOOL_BINS := $(TESTTOOL_SRC:tests/tools/%.c=$(BUILD)/tests/tools/%)

# The cuda backend's sources compiled a second time as plain C++ with -DNCF_CUDA_EMULATE
# (kernels/cuda/emu.h: kernels run on the CPU, cuBLAS is OpenBLAS) into the emulation test,
# which needs neither a GPU nor the CUDA toolkit (see tests/unit/test_cuda_emu.cc).
CXX_OK := $(shell $(CXX) --version >/dev/null 2>&1 && echo 1)
EMU_TEST_SRC := $(if $(CXX_OK),$(wildcard tests/unit/test_cuda_emu.cc))
ifneq ($(EMU_TEST_SRC),)
EMU_CPPFLAGS := $(filter-out -DNCF_HAVE_CUDA -DNCF_HAVE_NCCL -I$(CUDA_HOME)/include,$(CPPFLAGS_NCF)) \
	-DNCF_CUDA_EMULATE
EMU_CXXFLAGS := -std=gnu++17 -fopenmp -ffp-contract=off -fno-math-errno -Wall -Wextra -Wshadow \
	-Wno-unused-parameter -MMD -MP
EMU_SRC := $(CU_SRC) $(CU_TEST_SRC) $(EMU_TEST_SRC)
EMU_OBJ := $(EMU_SRC:%=$(BUILD)/emu/obj/%.o)
EMU_BINS := $(BUILD)/tests/test_cuda_emu
ASAN_EMU_OBJ := $(EMU_SRC:%=$(BUILD)/asan/emu/obj/%.o)
ASAN_BINS += $(BUILD)/asan/tests/test_cuda_emu
endif

# GPU tests (tests/gpu): C programs built where CUDA is, run by the tests/gpu/*.t scripts.
GPU_TEST_SRC := $(wildcard tests/gpu/*.c)
ifeq ($(BUILD_CUDA),1)
GPU_TEST_BINS := $(GPU_TEST_SRC:tests/gpu/%.c=$(BUILD)/tests/gpu/%)
CU_TEST_OBJ := $(CU_TEST_SRC:%.cu=$(BUILD)/obj/%.cu.o)
endif

## all: build the tools into build/bin (the default)
all: $(TOOL_BINS) $(UNIT_BINS) $(BENCH_BINS) $(TESTTOOL_BINS) $(EMU_BINS) $(GPU_TEST_BINS)

$(BUILD)/obj/%.o: %.c $(CONFIG) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_NCF) $(BASE_CFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu $(CONFIG) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(filter -I% -D%,$(CPPFLAGS_NCF)) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libncf.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/bin/%: $(BUILD)/obj/%/main.o $(BUILD)/libncf.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $< $(BUILD)/libncf.a $(LIBS) -o $@

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/libncf.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $< $(BUILD)/libncf.a $(LIBS) -o $@

$(BUILD)/tests/tools/%: $(BUILD)/obj/tests/tools/%.o $(BUILD)/libncf.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $< $(BUILD)/libncf.a $(LIBS) -o $@

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(BUILD)/libncf.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $< $(BUILD)/libncf.a $(LIBS) -o $@

$(BUILD)/tests/gpu/%: $(BUILD)/obj/tests/gpu/%.o $(CU_TEST_OBJ) $(BUILD)/libncf.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $< $(CU_TEST_OBJ) $(BUILD)/libncf.a $(LIBS) -o $@

# The emulation test: kernels/cuda/*.cu and the test as C++, against the C library.
$(BUILD)/emu/obj/%.o: % $(CONFIG) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) -x c++ $(EMU_CPPFLAGS) $(EMU_CXXFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/tests/test_cuda_emu: $(EMU_OBJ) $(BUILD)/libncf.a
	@mkdir -p $(dir $@)
	$(CXX) -fopenmp $(CFLAGS) $(EMU_OBJ) $(BUILD)/libncf.a $(LIBS) -o $@

$(BUILD)/asan/emu/obj/%.o: % $(CONFIG) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) -x c++ $(EMU_CPPFLAGS) $(EMU_CXXFLAGS) $(ASAN_FLAGS) -c $< -o $@

$(BUILD)/asan/tests/test_cuda_emu: $(ASAN_EMU_OBJ) $(BUILD)/asan/libncf.a
	@mkdir -p $(dir $@)
	$(CXX) -fopenmp $(ASAN_FLAGS) $(ASAN_EMU_OBJ) $(BUILD)/asan/libncf.a $(LIBS) -o $@

# AddressSanitizer + UndefinedBehaviorSanitizer build of the library and unit tests.
# It holds no CUDA objects, so it is compiled as a build without CUDA.
ASAN_CPPFLAGS := $(filter-out -DNCF_HAVE_CUDA -DNCF_HAVE_NCCL,$(CPPFLAGS_NCF))
$(BUILD)/asan/obj/%.o: %.c $(CONFIG) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_CPPFLAGS) $(BASE_CFLAGS) $(ASAN_FLAGS) -c $< -o $@

$(BUILD)/asan/libncf.a: $(ASAN_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/asan/tests/%: $(BUILD)/asan/obj/tests/unit/%.o $(BUILD)/asan/libncf.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(ASAN_FLAGS) $< $(BUILD)/asan/libncf.a $(LIBS) -o $@

TEST_ENV := OMP_WAIT_POLICY=passive NCF_BIN=$(CURDIR)/$(BUILD)/bin NCF_ROOT=$(CURDIR) NCF_DATA=$${NCF_DATA:-$(abspath ../shared/data)}
CLI_TESTS := $(sort $(wildcard tests/cli/*.t))

## check: run every test (unit, CLI, man page examples), then the unit tests under ASan+UBSan
check: all
	$(TEST_ENV) prove --exec '' $(UNIT_BINS) $(EMU_BINS) $(CLI_TESTS) tests/gpu/nogpu.t \
		tests/gpu/cost.t
	$(MAKE) --no-print-directory check-asan

## check-asan: the C unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer
check-asan: $(ASAN_BINS)
	$(TEST_ENV) ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 NCF_SANITIZER=1 \
		prove --exec '' $(ASAN_BINS)

## check-gpu: the GPU tests (tests/gpu; each skips without a GPU)
check-gpu: all
	$(TEST_ENV) prove --exec '' $(sort $(wildcard tests/gpu/*.t))

## demo: install what is missing, build, run the whole pipeline on synthetic data
demo: all
	@sh scripts/demo.sh $(BUILD)/bin

## bench: print the benchmark tables (prep, training, evaluation, inference)
bench: all
	@sh scripts/bench.sh $(BUILD)/bin

## ml-20m: download MovieLens 20M from GroupLens (needs internet), check it, prepare data/ml-20m.ncfc
ml-20m: $(BUILD)/bin/ncf-prep
	@sh scripts/ml-20m.sh $(BUILD)/bin

## plot: draw HR@10, NDCG@10 and loss per epoch of LOG=FILE (ncf-train --log) into LOG.png
plot:
	@test -n "$(LOG)" || { echo "usage: make plot LOG=train.jsonl [PNG=out.png]" >&2; exit 2; }
	@sh scripts/plot.sh "$(LOG)" "$(or $(PNG),$(LOG).png)"

MAN1 := $(wildcard man/*.1)
MAN5 := $(wildcard man/*.5)
MAN7 := $(wildcard man/*.7)

## install: install the tools and man pages under $(DESTDIR)$(PREFIX)
install: $(TOOL_BINS)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 755 $(TOOL_BINS) $(DESTDIR)$(PREFIX)/bin/
	$(if $(MAN1),install -m 644 $(MAN1) $(DESTDIR)$(PREFIX)/share/man/man1/)
	$(if $(MAN5),install -m 644 $(MAN5) $(DESTDIR)$(PREFIX)/share/man/man5/)
	$(if $(MAN7),install -m 644 $(MAN7) $(DESTDIR)$(PREFIX)/share/man/man7/)

## uninstall: remove what install installed
uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(TOOLS))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man1/,$(notdir $(MAN1)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man5/,$(notdir $(MAN5)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man7/,$(notdir $(MAN7)))

## clean: remove build/
clean:
	rm -rf $(BUILD)

## help: list the targets
help:
	@sed -n 's/^## \([a-z0-9-]*\): /  \1\t/p' $(MAKEFILE_LIST) | expand -t 16

.PHONY: all check check-asan check-gpu demo bench ml-20m plot install uninstall clean help
.SECONDARY:
.DELETE_ON_ERROR:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
