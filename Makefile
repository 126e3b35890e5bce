# ncf - Neural Collaborative Filtering as small Unix tools.
#
#   make            build the tools into build/bin (probes first, installs what is missing)
#   make tools      only the four programs (no tests, benchmarks or modules)
#   make demo       the whole pipeline on synthetic data
#   make check      tests (TAP, prove), then unit and CLI tests under ASan+UBSan+LSan,
#                   then every fuzz harness built and run briefly; one job per processor
#                   without a -j (CHECK_JOBS)
#   make fuzz       libFuzzer harnesses (clang), FUZZ_SECONDS each
#   make help       every target
#
# Variables: PREFIX DESTDIR CC CFLAGS NO_CUDA=1 NO_MPI=1 NO_ONNX=1 NO_DNNL=1 NO_YAML=1
#            CUDA_HOME NVCC CUDA_ARCH
#            GPU_ARCH CHECK_JOBS V=1 (print the full commands instead of 'CC common/cache.c' lines)
#
# The build comes in flavours, each in its own directory with its own flags, and each
# written below as one block: the default build, the CUDA module, the CPU emulation of
# CUDA, AddressSanitizer, libFuzzer.  A block sets its flags once, as target-specific
# variables of its directory (private: its prerequisites elsewhere keep theirs), and the
# shared rules (one compile rule per language, one link rule) read them.

PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif
NO_CUDA ?= 0
NO_MPI ?= 0
NO_ONNX ?= 0
NO_DNNL ?= 0
NO_YAML ?= 0
OPT ?= -O3 -march=native
CFLAGS ?= $(OPT) -g
BUILD ?= build
.DEFAULT_GOAL := all

# make check (and check-asan, check-fuzz) runs CHECK_JOBS jobs at once, by default one per
# processor, where no -j is given: the build (nvcc, the emulated and ASan flavours, the
# fuzz harnesses) and then prove, which runs that many test files side by side (PROVE_JOBS,
# below).  A -j on the command line wins (make -j1 check: one thing at a time, as before).
# Only the top-level make adds it: a sub-make shares its parent's jobs.
CHECK_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
ifeq ($(MAKELEVEL),0)
ifneq ($(filter check check-asan check-fuzz,$(MAKECMDGOALS)),)
MAKEFLAGS += -j$(CHECK_JOBS)
endif
endif

# Short build lines ("  CC      common/cache.c", "  LD      build/bin/ncf-train"); V=1
# prints every command in full instead.  Use: $(call say,CC,$<)$(CC) ...
V ?= 0
ifeq ($(V),1)
say =
else
say = @printf '  %-7s %s\n' '$(1)' '$(2)';
endif

# --- configuration (probes) ----------------------------------------------------------------
CONFIG := $(BUILD)/config.mk
# Reconfigure when the switches change.
CONFIG_WANT := NO_CUDA=$(NO_CUDA) NO_MPI=$(NO_MPI) NO_ONNX=$(NO_ONNX) NO_DNNL=$(NO_DNNL) \
	NO_YAML=$(NO_YAML) CC=$(CC)
CONFIG_STAMP := $(BUILD)/config.want
$(shell mkdir -p $(BUILD); [ "$$(cat $(CONFIG_STAMP) 2>/dev/null)" = "$(CONFIG_WANT)" ] || echo "$(CONFIG_WANT)" > $(CONFIG_STAMP))

$(CONFIG): scripts/configure.sh $(CONFIG_STAMP)
	@CC="$(CC)" NO_CUDA=$(NO_CUDA) NO_MPI=$(NO_MPI) NO_ONNX=$(NO_ONNX) NO_DNNL=$(NO_DNNL) \
		NO_YAML=$(NO_YAML) sh scripts/configure.sh $@

# Goals that need no probing (gpu-bundle probes in a build directory of its own).
NOCONF_GOALS := clean help uninstall gpu-bundle
ifneq ($(filter-out $(NOCONF_GOALS),$(or $(MAKECMDGOALS),all)),)
-include $(CONFIG)
endif

# --- what every flavour shares ------------------------------------------------------------
WARN := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wstrict-prototypes
CPPFLAGS_NCF := -Icommon -Ikernels -Icli -D_GNU_SOURCE
BASE_CFLAGS := -std=gnu11 -fopenmp -ffp-contract=off -fno-math-errno -fno-trapping-math $(WARN) -MMD -MP
LIBS := -ljansson -lzstd -lcsv -lopenblas -lm -lpthread -ldl
# oneDNN: the cpu backend's dense products (kernels/cpu/matmul.h); without it, OpenBLAS.
ifeq ($(HAVE_DNNL),1)
CPPFLAGS_NCF += -DNCF_HAVE_DNNL
LIBS += -ldnnl
endif
# libyaml: ncf-prep --feature-spec (ncf-prep/spec.c); without it that option exits 3.
ifeq ($(HAVE_YAML),1)
CPPFLAGS_NCF += -DNCF_HAVE_YAML
LIBS += -lyaml
endif
ifeq ($(HAVE_MPI),1)
CPPFLAGS_NCF += -DNCF_HAVE_MPI $(MPI_CFLAGS)
LIBS += $(MPI_LIBS)
endif

# libncf.a is common/ and kernels/ (not kernels/cuda/, the module): what every tool and test
# links.  A tool is the files of its own directory (TOOL/*.c) on top of it.  ncf-prep's
# parse, protocol, rows and synth are ncf-prep's alone (PREP_SRC); the few tests of them
# (PREP_USERS) are compiled with -Incf-prep and linked with those objects as well
# (bench_gpu --cost takes its shapes from the synthetic data sets).
TOOLS := ncf-prep ncf-train ncf-eval ncf-infer
LIB_SRC := $(wildcard common/*.c) $(wildcard kernels/*.c kernels/cpu/*.c)
PREP_SRC := $(filter-out ncf-prep/main.c,$(wildcard ncf-prep/*.c))
# cli/: what the programs share above the library (a bad command line ends with exit 2);
# linked into the tools and benchmarks, never into libncf.a.
CLI_SRC := $(wildcard cli/*.c)
PREP_USERS := tests/unit/test_prep_mls tests/fuzz/fuzz_prep tests/fuzz/fuzz_given bench/bench_gpu
PREP_CPPFLAGS := -Incf-prep
UNIT_SRC := $(wildcard tests/unit/test_*.c)
BENCH_SRC := $(wildcard bench/*.c)
TESTTOOL_SRC := $(wildcard tests/tools/*.c)
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
CU_SRC := $(filter-out %/test_hooks.cu,$(wildcard kernels/cuda/*.cu))
CU_TEST_SRC := $(wildcard kernels/cuda/test_hooks.cu)
GPU_TEST_SRC := $(wildcard tests/gpu/*.c)
# objs DIR, SOURCES: the objects of SOURCES (.c) in the object directory DIR
objs = $(patsubst %.c,$(1)/%.o,$(2))

# Rebuild when the flags change: this stamp for every object, and the cuda module's own
# (CUDA_FLAGS_STAMP, below where its flags are known) for nvcc's objects alone, so that
# another GPU_ARCH rebuilds the module and not the C code.  Not for the goals that read no
# configuration: without it their flags would differ, and the next build would recompile
# everything.
FLAGS_STAMP := $(BUILD)/flags.stamp
FLAGS_NOW := $(CC) $(CPPFLAGS_NCF) $(BASE_CFLAGS) $(CFLAGS) $(LIBS)
ifneq ($(filter-out $(NOCONF_GOALS),$(or $(MAKECMDGOALS),all)),)
$(shell [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" = '$(FLAGS_NOW)' ] || echo '$(FLAGS_NOW)' > $(FLAGS_STAMP))
endif

# c_flavour DIR, LABEL: the C objects of the flavour in DIR/obj (its flags: FLAVOUR_CPPFLAGS
# and FLAVOUR_CFLAGS, set for DIR) and its libncf.a.  OBJ_CPPFLAGS: the extra preprocessor
# flags of a few objects (set per object, private).
define c_flavour
$(1)/obj/%.o: %.c $$(CONFIG) $$(FLAGS_STAMP)
	@mkdir -p $$(dir $$@)
	$$(call say,CC,$$<$(2))$$(CC) $$(FLAVOUR_CPPFLAGS) $$(OBJ_CPPFLAGS) $$(BASE_CFLAGS) \
		$$(FLAVOUR_CFLAGS) -c $$< -o $$@
$(1)/libncf.a: $$(call objs,$(1)/obj,$$(LIB_SRC))
	$$(call say,AR,$$@)rm -f $$@ && ar rcs $$@ $$^
endef

# The one link rule of every C program: its objects, its archive whole (the cuda module,
# opened at run time, calls the library in the program: every symbol is there and exported),
# then LIBS and its own extras, $(NAME_LIBS) for a program called NAME.  Its prerequisites
# say which objects; the flavour's FLAVOUR_CFLAGS are its link flags.
C_PROGRAMS = $(TOOL_BINS) $(UNIT_BINS) $(TESTTOOL_BINS) $(BENCH_BINS) $(REPLAY_BINS) \
	$(GPU_TEST_BINS) $(ASAN_TOOL_BINS) $(ASAN_UNIT_BINS) $(ASAN_REPLAY_BINS)
LINK_ARCHIVE = -Wl,--export-dynamic -Wl,--whole-archive $(filter %.a,$^) -Wl,--no-whole-archive

# --- flavour: the default build (build/obj, build/bin, build/tests, build/bench) ----------
FLAVOUR_CPPFLAGS := $(CPPFLAGS_NCF)
FLAVOUR_CFLAGS := $(CFLAGS)
FLAVOUR_CXXFLAGS := $(CFLAGS)
$(eval $(call c_flavour,$(BUILD),))
LIB_OBJ := $(call objs,$(BUILD)/obj,$(LIB_SRC))
PREP_OBJ := $(call objs,$(BUILD)/obj,$(PREP_SRC))
TOOL_BINS := $(foreach t,$(TOOLS),$(if $(wildcard $(t)/main.c),$(BUILD)/bin/$(t)))
UNIT_BINS := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
BENCH_BINS := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
TESTTOOL_BINS := $(TESTTOOL_SRC:tests/tools/%.c=$(BUILD)/tests/tools/%)
# The fuzz harnesses (tests/fuzz/fuzz_*.c) linked with replay.c into plain programs: make
# check replays the reproducers kept in tests/fuzz/regress/TARGET/ (no clang needed).
REPLAY_BINS := $(FUZZ_NAMES:%=$(BUILD)/tests/fuzz/replay_%)
$(foreach t,$(TOOLS),$(eval $(BUILD)/bin/$(t): \
	$(call objs,$(BUILD)/obj,$(wildcard $(t)/*.c) $(CLI_SRC)) $(BUILD)/libncf.a))
# every unit test links tests/unit/helpers.c, the helpers the tests share
$(UNIT_BINS): $(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/obj/tests/unit/helpers.o \
	$(BUILD)/libncf.a
$(TESTTOOL_BINS): $(BUILD)/tests/tools/%: $(BUILD)/obj/tests/tools/%.o $(BUILD)/libncf.a
$(BENCH_BINS): $(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(call objs,$(BUILD)/obj,$(CLI_SRC)) \
	$(BUILD)/libncf.a
$(REPLAY_BINS): $(BUILD)/tests/fuzz/replay_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o \
	$(BUILD)/obj/tests/fuzz/replay.o $(BUILD)/libncf.a
$(BUILD)/tests/test_prep_mls $(BUILD)/tests/fuzz/replay_prep $(BUILD)/tests/fuzz/replay_given \
	$(BUILD)/bench/bench_gpu: $(PREP_OBJ)
$(PREP_USERS:%=$(BUILD)/obj/%.o): private OBJ_CPPFLAGS := $(PREP_CPPFLAGS)
# Where make install puts the cuda module, for the loader to look last (kernels/module.h).
$(BUILD)/obj/kernels/module.o: private OBJ_CPPFLAGS := -DNCF_MODULE_DIR='"$(PREFIX)/lib/ncf"'

# --- flavour: the cuda module (nvcc), build/cuda/obj -> build/lib/ncf/ncf-cuda.so ---------
# kernels/cuda/*.cu as one shared module that the tools open only when a GPU is asked for
# (kernels/module.h): the tools never link CUDA.  GPU code for sm_80 and sm_90 with PTX
# for newer GPUs; GPU_ARCH=90 builds for one architecture only (scripts/gpu-check.sh, for
# the GPU it finds), CUDA_ARCH for any nvcc -gencode list.  The GPU tests (tests/gpu/*.c)
# link the module and the test hooks.
# -fmad=false: no contraction of a*b+c into FMAs, so that the formulas shared with the CPU
# (ncf_hd.h: Adam, dropout, the head) round as gcc's -ffp-contract=off does.
ifneq ($(GPU_ARCH),)
CUDA_ARCH ?= -gencode arch=compute_$(GPU_ARCH),code=sm_$(GPU_ARCH)
endif
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	     -gencode arch=compute_90,code=compute_90
NVCCFLAGS ?= -O3 -std=c++17 -fmad=false -Xcompiler -fopenmp,-Wall,-fPIC -lineinfo
ifneq ($(wildcard kernels/cuda/backend.cu),)
BUILD_CUDA := $(HAVE_CUDA)
endif
CUDA_MODULE := $(BUILD)/lib/ncf/ncf-cuda.so
ifeq ($(BUILD_CUDA),1)
CUDA_CPPFLAGS := $(CPPFLAGS_NCF) -I$(CUDA_HOME)/include $(if $(filter 1,$(HAVE_NCCL)),-DNCF_HAVE_NCCL)
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart \
	$(if $(filter 1,$(HAVE_NCCL)),-lnccl)
CU_OBJ := $(CU_SRC:%=$(BUILD)/cuda/obj/%.o)
CU_TEST_OBJ := $(CU_TEST_SRC:%=$(BUILD)/cuda/obj/%.o)
GPU_TEST_BINS := $(GPU_TEST_SRC:tests/gpu/%.c=$(BUILD)/tests/gpu/%)
CUDA_FLAGS_STAMP := $(BUILD)/cuda/flags.stamp
CUDA_FLAGS_NOW := $(NVCC) $(CUDA_CPPFLAGS) $(NVCCFLAGS) $(CUDA_ARCH)
$(shell mkdir -p $(BUILD)/cuda; [ "$$(cat $(CUDA_FLAGS_STAMP) 2>/dev/null)" = '$(CUDA_FLAGS_NOW)' ] || echo '$(CUDA_FLAGS_NOW)' > $(CUDA_FLAGS_STAMP))
$(BUILD)/cuda/obj/%.cu.o: %.cu $(CONFIG) $(FLAGS_STAMP) $(CUDA_FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,NVCC,$<)$(NVCC) $(filter -I% -D%,$(CUDA_CPPFLAGS)) $(NVCCFLAGS) $(CUDA_ARCH) \
		-MMD -MP -c $< -o $@
$(CUDA_MODULE): $(CU_OBJ)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CXX) -shared -fopenmp $(CFLAGS) $^ $(CUDA_LIBS) -o $@
# The GPU tests: the module linked in (found by the loader without a search), run from
# build/tests/gpu.
$(BUILD)/obj/tests/gpu/%.o: private OBJ_CPPFLAGS := -DNCF_HAVE_CUDA
$(GPU_TEST_BINS): $(BUILD)/tests/gpu/%: $(BUILD)/obj/tests/gpu/%.o $(CU_TEST_OBJ) $(CUDA_MODULE) \
	$(BUILD)/obj/tests/unit/helpers.o $(BUILD)/libncf.a
$(GPU_TEST_BINS): private GPU_LINK = -L$(dir $(CUDA_MODULE)) -l:ncf-cuda.so \
	-Wl,-rpath,'$$ORIGIN/../../lib/ncf' $(CUDA_LIBS) -lstdc++

## cuda: the tools, the cuda module and the GPU tests only (GPU_ARCH=90: for one architecture)
cuda: $(TOOL_BINS) $(BENCH_BINS) $(CUDA_MODULE) $(GPU_TEST_BINS)
else
cuda:
	@echo "make cuda: no CUDA toolkit found (nvcc, cuBLAS under CUDA_HOME=$(CUDA_HOME))" >&2; exit 1
endif

# --- flavour: the CPU emulation of the cuda module (C++), build/emu ----------------------
# kernels/cuda/*.cu compiled a second time as plain C++ with -DNCF_CUDA_EMULATE
# (kernels/cuda/emu.h: kernels run on the CPU, cuBLAS is OpenBLAS), with no GPU and no CUDA
# toolkit: into the emulation test (tests/unit/test_cuda_emu.cc), tests/gpu/gpu_parity.c
# built against it, and an emulated module, build/lib/ncf/ncf-cuda-emu.so, with which the
# tools run the cuda backend here (NCF_CUDA_MODULE=...; tests/cli/module.t).  Under
# check-asan the same again with the sanitizers.
CXX_OK := $(shell $(CXX) --version >/dev/null 2>&1 && echo 1)
EMU_TEST_SRC := $(if $(CXX_OK),$(wildcard tests/unit/test_cuda_emu.cc))
ifneq ($(EMU_TEST_SRC),)
EMU_CPPFLAGS := $(CPPFLAGS_NCF) -DNCF_CUDA_EMULATE
EMU_CXXFLAGS := -std=gnu++17 -fopenmp -fPIC -ffp-contract=off -fno-math-errno -Wall -Wextra \
	-Wshadow -Wno-unused-parameter -MMD -MP
EMU_CU_OBJ := $(CU_SRC:%=$(BUILD)/emu/obj/%.o)
EMU_OBJ := $(EMU_CU_OBJ) $(CU_TEST_SRC:%=$(BUILD)/emu/obj/%.o) $(BUILD)/emu/obj/$(EMU_TEST_SRC).o
ASAN_EMU_OBJ := $(EMU_OBJ:$(BUILD)/emu/%=$(BUILD)/asan/emu/%)
EMU_MODULE := $(BUILD)/lib/ncf/ncf-cuda-emu.so
EMU_BINS := $(BUILD)/tests/test_cuda_emu
EMU_TOOLS := $(BUILD)/tests/gpu_parity_emu $(EMU_MODULE)
EMU_SCRIPTS := tests/unit/test_cuda_emu_lazy.t tests/unit/gpu_parity_emu.t
$(BUILD)/emu/obj/%.o $(BUILD)/asan/emu/obj/%.o: % $(CONFIG) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CXX,$< [$(if $(findstring /asan/,$@),asan emu,emu)])$(CXX) -x c++ $(EMU_CPPFLAGS) \
		$(EMU_CXXFLAGS) $(FLAVOUR_CXXFLAGS) -c $< -o $@
$(BUILD)/tests/test_cuda_emu: $(EMU_OBJ) $(BUILD)/obj/tests/unit/helpers.o $(BUILD)/libncf.a
$(BUILD)/asan/tests/test_cuda_emu: $(ASAN_EMU_OBJ) $(BUILD)/asan/obj/tests/unit/helpers.o \
	$(BUILD)/asan/libncf.a
$(BUILD)/tests/test_cuda_emu $(BUILD)/asan/tests/test_cuda_emu:
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CXX) -fopenmp $(FLAVOUR_CXXFLAGS) $(filter %.o,$^) $(filter %.a,$^) \
		$(LIBS) -o $@
$(BUILD)/emu/obj/tests/gpu/gpu_parity.o: tests/gpu/gpu_parity.c $(CONFIG) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$< [emu])$(CC) $(EMU_CPPFLAGS) $(BASE_CFLAGS) $(CFLAGS) -c $< -o $@
$(BUILD)/tests/gpu_parity_emu: $(BUILD)/emu/obj/tests/gpu/gpu_parity.o $(EMU_CU_OBJ) \
	$(BUILD)/emu/obj/kernels/cuda/test_hooks.cu.o $(BUILD)/obj/tests/unit/helpers.o \
	$(BUILD)/libncf.a
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CXX) -fopenmp $(CFLAGS) $^ $(LIBS) -o $@
$(EMU_MODULE): $(EMU_CU_OBJ) $(BUILD)/emu/obj/kernels/cuda/emu_module.cc.o
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CXX) -shared -fopenmp $(CFLAGS) $^ -o $@
endif

# --- flavour: AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer, build/asan ----
# The library, the unit tests, the tools and the fuzz replays; check-asan runs the unit
# tests and the CLI tests against them, every sanitizer report going to a file under
# build/asan/reports, and any such file fails the check (a test that expects exit 1 cannot
# mistake a report for the refusal it wanted).
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
$(BUILD)/asan/%: private FLAVOUR_CFLAGS := $(ASAN_FLAGS)
$(BUILD)/asan/%: private FLAVOUR_CXXFLAGS := $(ASAN_FLAGS)
$(eval $(call c_flavour,$(BUILD)/asan, [asan]))
ASAN_TOOL_BINS := $(TOOL_BINS:$(BUILD)/bin/%=$(BUILD)/asan/bin/%)
ASAN_UNIT_BINS := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/asan/tests/%)
ASAN_REPLAY_BINS := $(FUZZ_NAMES:%=$(BUILD)/asan/tests/fuzz/replay_%)
ASAN_BINS := $(ASAN_UNIT_BINS) $(if $(EMU_TEST_SRC),$(BUILD)/asan/tests/test_cuda_emu)
ASAN_PREP_OBJ := $(call objs,$(BUILD)/asan/obj,$(PREP_SRC))
ASAN_SKIP_CLI := tests/cli/accuracy.t tests/cli/mpi.t tests/cli/nodes.t
ASAN_REPORTS := $(BUILD)/asan/reports
$(foreach t,$(TOOLS),$(eval $(BUILD)/asan/bin/$(t): \
	$(call objs,$(BUILD)/asan/obj,$(wildcard $(t)/*.c) $(CLI_SRC)) $(BUILD)/asan/libncf.a))
$(ASAN_UNIT_BINS): $(BUILD)/asan/tests/%: $(BUILD)/asan/obj/tests/unit/%.o \
	$(BUILD)/asan/obj/tests/unit/helpers.o $(BUILD)/asan/libncf.a
$(ASAN_REPLAY_BINS): $(BUILD)/asan/tests/fuzz/replay_%: $(BUILD)/asan/obj/tests/fuzz/fuzz_%.o \
	$(BUILD)/asan/obj/tests/fuzz/replay.o $(BUILD)/asan/libncf.a
$(BUILD)/asan/tests/test_prep_mls $(BUILD)/asan/tests/fuzz/replay_prep \
	$(BUILD)/asan/tests/fuzz/replay_given: $(ASAN_PREP_OBJ)
$(PREP_USERS:%=$(BUILD)/asan/obj/%.o): private OBJ_CPPFLAGS := $(PREP_CPPFLAGS)

## check-asan: the unit tests and the CLI tests (but accuracy, mpi, nodes) under ASan+UBSan+LSan
check-asan: $(ASAN_BINS) $(ASAN_TOOL_BINS) $(ASAN_REPLAY_BINS) $(TESTTOOL_BINS)
	$(TEST_ENV) ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 NCF_SANITIZER=1 \
		$(PROVE) $(call slow_first,$(ASAN_BINS))
	@rm -rf $(ASAN_REPORTS) && mkdir -p $(ASAN_REPORTS)
	$(TEST_ENV) NCF_BIN=$(CURDIR)/$(BUILD)/asan/bin NCF_SANITIZER=1 \
		ASAN_OPTIONS=detect_leaks=1:exitcode=86:log_path=$(CURDIR)/$(ASAN_REPORTS)/asan \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86:log_path=$(CURDIR)/$(ASAN_REPORTS)/ubsan \
		$(PROVE) $(call slow_first,$(filter-out $(ASAN_SKIP_CLI),$(CLI_TESTS)))
	@if [ -n "$$(ls -A $(ASAN_REPORTS))" ]; then \
		echo "sanitizer reports in $(ASAN_REPORTS):"; head -n 30 $(ASAN_REPORTS)/*; exit 1; fi

# --- flavour: libFuzzer (clang), build/fuzz --------------------------------------------------
# make fuzz: the library and the harnesses built with clang's libFuzzer and the sanitizers,
# each target run for FUZZ_SECONDS on seeds the tools make (tests/fuzz/run.sh); *_sa
# targets add the structure-aware mutator.  A crash, leak or sanitizer report fails it,
# the reproducer left in build/fuzz/artifacts/TARGET/.  The safetensors reader has its own
# target, seeds and time (make fuzz-safetensors, FUZZ_TIME).
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TIME ?= 600
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -O1 -g -std=gnu11 -fopenmp -ffp-contract=off -fno-math-errno -Wall \
	-Wno-unused-parameter -Wno-unused-function -Wno-unknown-pragmas -MMD -MP $(FUZZ_SAN)
FUZZ_CPPFLAGS := $(filter-out -DNCF_HAVE_MPI $(MPI_CFLAGS),$(CPPFLAGS_NCF)) -Itests/fuzz
# the libraries of every other build (oneDNN's among them, where it was found) but MPI's
FUZZ_LIBS := $(filter-out $(MPI_LIBS),$(LIBS))
FUZZ_OBJ := $(call objs,$(BUILD)/fuzz/obj,$(LIB_SRC))
FUZZ_TARGETS := $(foreach n,$(filter-out safetensors,$(FUZZ_NAMES)),$(BUILD)/fuzz/fuzz_$(n)) \
	$(if $(filter cache,$(FUZZ_NAMES)),$(BUILD)/fuzz/fuzz_cache_sa) \
	$(if $(filter ckpt,$(FUZZ_NAMES)),$(BUILD)/fuzz/fuzz_ckpt_sa)
FUZZ_ALL := $(FUZZ_TARGETS) $(if $(filter safetensors,$(FUZZ_NAMES)),$(BUILD)/fuzz/fuzz_safetensors)
FUZZ_CC_FOUND := $(shell command -v $(FUZZ_CC) >/dev/null 2>&1 && echo 1)
$(BUILD)/fuzz/obj/%.o: %.c $(CONFIG) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$< [fuzz])$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link \
		-c $< -o $@
$(BUILD)/fuzz/libncf.a: $(FUZZ_OBJ)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^
# A harness is compiled and linked in one go, with the archive and its extra objects; the
# structure-aware ones with -DNCF_FUZZ_STRUCTURE.
FUZZ_LINK = $(FUZZ_CC) $(FUZZ_CPPFLAGS) $(OBJ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< \
	$(filter %.o,$^) $(BUILD)/fuzz/libncf.a $(FUZZ_LIBS) -o $@
$(BUILD)/fuzz/fuzz_%_sa: tests/fuzz/fuzz_%.c $(BUILD)/fuzz/libncf.a
	$(call say,LD,$@)$(FUZZ_LINK) -DNCF_FUZZ_STRUCTURE
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(BUILD)/fuzz/libncf.a
	$(call say,LD,$@)$(FUZZ_LINK)
$(BUILD)/fuzz/fuzz_prep $(BUILD)/fuzz/fuzz_given: $(call objs,$(BUILD)/fuzz/obj,$(PREP_SRC))
$(BUILD)/fuzz/fuzz_prep $(BUILD)/fuzz/fuzz_given: private OBJ_CPPFLAGS := $(PREP_CPPFLAGS)

## fuzz: build the libFuzzer harnesses (clang) and run each FUZZ_SECONDS (default 60)
fuzz: $(TOOL_BINS) $(TESTTOOL_BINS) $(FUZZ_TARGETS)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh $(BUILD) $(notdir $(FUZZ_TARGETS))

# make check builds every harness and runs each on its seeds for FUZZ_RUNS inputs, so that
# the fuzz build cannot break unnoticed; without clang it says so and goes on.
FUZZ_RUNS ?= 200
## check-fuzz: build every libFuzzer harness (clang) and run each briefly (FUZZ_RUNS inputs)
ifeq ($(FUZZ_CC_FOUND),1)
check-fuzz: $(TOOL_BINS) $(TESTTOOL_BINS) $(FUZZ_ALL)
	@FUZZ_RUNS=$(FUZZ_RUNS) sh tests/fuzz/run.sh $(BUILD) $(notdir $(FUZZ_ALL))
else
check-fuzz:
	@echo "check-fuzz: skipped: no $(FUZZ_CC) to build the libFuzzer harnesses (install clang)"
endif

## fuzz-safetensors: fuzz the safetensors reader for FUZZ_TIME seconds (default 600; clang)
fuzz-safetensors: $(BUILD)/fuzz/fuzz_safetensors $(TOOL_BINS)
	@sh tests/fuzz/seed_safetensors.sh $(BUILD)/bin $(BUILD)/fuzz/corpus-safetensors
	$(BUILD)/fuzz/fuzz_safetensors -max_total_time=$(FUZZ_TIME) -close_fd_mask=2 \
		-dict=tests/fuzz/safetensors.dict $(BUILD)/fuzz/corpus-safetensors

# --- the ONNX export (ncf-infer, both C flavours) ---------------------------------------------
# export_onnx.c serialises with C that protoc-c generates into $(BUILD)/gen from the
# onnx.proto of Debian's libonnx-dev (scripts/configure.sh probes and installs it; nothing
# generated is kept in the tree); without it (NO_ONNX=1, or not found) ncf-infer --export
# F.onnx exits 3.
EXPORT_ONNX_OBJ := $(BUILD)/obj/ncf-infer/export_onnx.o $(BUILD)/asan/obj/ncf-infer/export_onnx.o
ifeq ($(HAVE_ONNX),1)
ONNX_OBJ := $(BUILD)/obj/gen/onnx.pb-c.o
ncf-infer_LIBS := -lprotobuf-c
$(EXPORT_ONNX_OBJ): private OBJ_CPPFLAGS := -DNCF_HAVE_ONNX -I$(BUILD)/gen
$(EXPORT_ONNX_OBJ): $(BUILD)/gen/onnx.pb-c.h
else
$(EXPORT_ONNX_OBJ): private OBJ_CPPFLAGS := -DNCF_ONNX_MISSING='"$(ONNX_MISSING)"'
endif
$(BUILD)/bin/ncf-infer $(BUILD)/asan/bin/ncf-infer: $(ONNX_OBJ)
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: $(dir $(ONNX_PROTO))%.proto $(CONFIG)
	@mkdir -p $(dir $@)
	$(call say,GEN,$@)$(PROTOC_C) --c_out=$(BUILD)/gen -I$(dir $(ONNX_PROTO)) $<
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(CONFIG)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) -I$(BUILD)/gen $(BASE_CFLAGS) $(CFLAGS) -w -c $< -o $@

# --- linking (every flavour's C programs) -----------------------------------------------------
# (unit tests and fuzz replays never open the module; some compile a library file into
# themselves, which a whole archive would define twice)
$(UNIT_BINS) $(ASAN_UNIT_BINS) $(REPLAY_BINS) $(ASAN_REPLAY_BINS): private LINK_ARCHIVE = $(filter %.a,$^)
$(C_PROGRAMS):
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) $(filter %.o,$^) $(LINK_ARCHIVE) \
		$(GPU_LINK) $(LIBS) $($(notdir $@)_LIBS) -o $@

## tools: only the four programs, into build/bin (no tests, benchmarks or modules)
tools: $(TOOL_BINS)

## all: build the tools into build/bin (the default), the cuda module where CUDA is, the tests
all: $(TOOL_BINS) $(UNIT_BINS) $(BENCH_BINS) $(TESTTOOL_BINS) $(EMU_BINS) $(EMU_TOOLS) \
	$(if $(filter 1,$(BUILD_CUDA)),$(CUDA_MODULE)) $(GPU_TEST_BINS) $(REPLAY_BINS)

# --- tests ------------------------------------------------------------------------------------
TEST_ENV := OMP_WAIT_POLICY=passive NCF_BIN=$(CURDIR)/$(BUILD)/bin NCF_ROOT=$(CURDIR) NCF_DATA=$${NCF_DATA:-$(abspath ../shared/data)}
CLI_TESTS := $(sort $(wildcard tests/cli/*.t))
# prove runs as many test files at once as make runs jobs (make's -jN; CHECK_JOBS for a bare
# -j; one without -j).  Every test works in a temporary directory of its own (tests/lib.sh)
# and names nothing fixed outside it (nodes.t's network hosts are named by its process id,
# on a subnet no other run holds), so files can run side by side.  The slowest start first
# (SLOW_TESTS, slowest first, measured on 2 cores), so that no long file is left running
# alone at the end; the rest follow in name order.  A test missing from the list only
# starts later.
PROVE_JOBS = $(if $(filter -j,$(MAKEFLAGS)),$(CHECK_JOBS),$(or $(patsubst -j%,%,$(firstword \
	$(filter -j%,$(MAKEFLAGS)))),1))
PROVE = prove -j$(PROVE_JOBS) --exec ''
SLOW_TESTS := $(BUILD)/asan/tests/test_cuda_emu tests/unit/gpu_parity_emu.t tests/cli/nodes.t \
	tests/cli/accuracy.t tests/cli/gpu-check.t tests/cli/train.t tests/cli/hostile.t \
	tests/cli/module.t tests/cli/faults.t tests/cli/bf16.t tests/cli/gpu-rehearse.t \
	tests/cli/crafted.t tests/cli/mpi.t $(BUILD)/tests/test_cuda_emu tests/unit/test_cuda_emu_lazy.t \
	tests/cli/man-examples.t tests/cli/gpu-bundle.t tests/cli/infer.t
# slow_first FILES: FILES, those of SLOW_TESTS first
slow_first = $(filter $(1),$(SLOW_TESTS)) $(filter-out $(SLOW_TESTS),$(1))

## check: run every test (unit, CLI, man page examples), then check-asan and check-fuzz
check: all
	$(TEST_ENV) $(PROVE) $(call slow_first,$(UNIT_BINS) $(EMU_BINS) $(EMU_SCRIPTS) $(CLI_TESTS) \
		tests/gpu/nogpu.t tests/gpu/cost.t tests/gpu/sass.t)
	$(MAKE) --no-print-directory check-asan
	$(MAKE) --no-print-directory check-fuzz

## check-gpu: the GPU tests (tests/gpu; each skips without a GPU)
check-gpu: all
	$(TEST_ENV) prove --exec '' $(sort $(wildcard tests/gpu/*.t))

# Many machines, on one (root): hosts over TCP, Slurm.
## check-nodes: ncf-train across network-namespace hosts over TCP (root; fails where it cannot run)
check-nodes: all
	$(TEST_ENV) NCF_REQUIRE_NODES=1 prove -v --exec '' tests/cli/nodes.t

## check-slurm: srun and sbatch on a one-node Slurm cluster started here (root; installs slurm-wlm, munge)
check-slurm: all
	sh scripts/slurm-cluster.sh install
	$(TEST_ENV) NCF_REQUIRE_SLURM=1 prove -v --exec '' tests/slurm/slurm.t

## bench-nodes: 2 ranks over TCP between network-namespace hosts against 2 over shared memory, alternately (root)
bench-nodes: all
	@sh scripts/bench-nodes.sh $(BUILD)/bin

## demo: install what is missing, build, run the whole pipeline on synthetic data
demo: all
	@sh scripts/demo.sh $(BUILD)/bin

## bench: print the benchmark tables (prep, training, evaluation, inference)
bench: all
	@sh scripts/bench.sh $(BUILD)/bin

## ml-20m: download MovieLens 20M from GroupLens (needs internet), check it, prepare data/ml-20m.ncfc
ml-20m: $(BUILD)/bin/ncf-prep
	@sh scripts/ml-20m.sh $(BUILD)/bin

## plot: draw HR@10, NDCG@10 and loss per epoch of LOG=FILE (ncf-train --log) into LOG.png (needs gnuplot: says how to get it)
plot:
	@test -n "$(LOG)" || { echo "usage: make plot LOG=train.jsonl [PNG=out.png]" >&2; exit 2; }
	@sh scripts/plot.sh "$(LOG)" "$(or $(PNG),$(LOG).png)"

# --- the GPU bundle: .gpu-run/ ------------------------------------------------------------------
# What scripts/gpu-check.sh --bundle runs on a GPU machine that has a driver and CUDA's own
# libraries but none of the -dev packages the build needs, no network and little time: made
# here, in a build directory of its own (build/bundle), then gathered by scripts/gpu-bundle.sh
# into GPU_BUNDLE with every shared library the programs need that is not glibc, the GCC
# runtime or CUDA's own, a MANIFEST, SHA256SUMS and a copy of NVIDIA's NCF (PEER), and
# checked: under BUNDLE_MIB MiB (it travels with the working tree), every library resolved
# inside it, a CPU training run by its tools.
#  - x86-64-v3 (AVX2, FMA, BMI2), not -march=native: every x86-64 server CPU since 2013
#    (Intel Haswell, AMD Zen) has it, so every host of an A100, H100 or H200 does; this
#    machine's native code has AVX-512 and AMX, which AMD's Zen 2 and Zen 3 hosts lack
#    (x86-64-v4 would exclude them), and v2 would give up the cpu backend's AVX2 paths.
#  - NO_DNNL=1: oneDNN's library is 38 MiB, too much to carry; the cpu backend's products go
#    through OpenBLAS (the GPU check's cpu side is parity in fp32).  NO_MPI=1 and no NCCL
#    (HAVE_NCCL=0): one GPU, one rank; NCCL's library (208 MiB) is not part of CUDA's
#    toolkit, so the GPU machine's may be on no path the loader searches, and an MPI
#    library is the machine's own business (the check's mpi stage skips itself).
#  - GPU code for sm_80 and sm_90 (A100; H100, H200), no PTX: what the bundle runs on is
#    checked against the MANIFEST's list first.
#  - NVIDIA's convert.py needs pandas < 3, which a GPU machine's Python may not have and
#    cannot fetch: the wheels of PEER_WHEELS for its Python (PEER_PYTHON_VERSION), from
#    PyPI once (kept in build/bundle/wheels), go with the peer; without a network the
#    bundle is made without them and its MANIFEST says so.
GPU_BUNDLE ?= .gpu-run
BUNDLE_BUILD := $(BUILD)/bundle
BUNDLE_OPT := -O3 -march=x86-64-v3
BUNDLE_CUDA_ARCH := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
BUNDLE_MIB ?= 48
PEER ?= ../shared/peer
PEER_WHEELS ?= pandas==2.3.3 pytz tzdata
PEER_PYTHON_VERSION ?= 3.12

## gpu-bundle: .gpu-run/, what gpu-check.sh --bundle runs on a GPU machine (x86-64-v3, sm_80+sm_90, libraries, NVIDIA's NCF)
gpu-bundle:
	@$(MAKE) --no-print-directory BUILD=$(BUNDLE_BUILD) OPT='$(BUNDLE_OPT)' NO_MPI=1 NO_DNNL=1 HAVE_NCCL=0 \
		CUDA_ARCH='$(BUNDLE_CUDA_ARCH)' cuda $(BUNDLE_BUILD)/tests/tools/ckpt_diff
	@mkdir -p $(BUNDLE_BUILD)/wheels; ls $(BUNDLE_BUILD)/wheels/*.whl >/dev/null 2>&1 || \
		python3 -m pip download -q --no-deps --only-binary=:all: \
			--python-version $(PEER_PYTHON_VERSION) --implementation cp \
			--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
			--platform manylinux2014_x86_64 -d $(BUNDLE_BUILD)/wheels $(PEER_WHEELS) || \
		{ rm -f $(BUNDLE_BUILD)/wheels/*.whl; \
		  echo "gpu-bundle: no wheels of $(PEER_WHEELS) (pip download failed): the peer's convert.py will need pandas < 3 there"; }
	@BUNDLE_MIB=$(BUNDLE_MIB) BUNDLE_WHEELS=$(BUNDLE_BUILD)/wheels \
		BUNDLE_FLAGS="$(BUNDLE_OPT) NO_MPI=1 NO_DNNL=1 HAVE_NCCL=0 $(BUNDLE_CUDA_ARCH)" \
		sh scripts/gpu-bundle.sh $(BUNDLE_BUILD) $(GPU_BUNDLE) $(PEER)

# --- install ----------------------------------------------------------------------------------
MAN1 := $(wildcard man/*.1)
MAN5 := $(wildcard man/*.5)
MAN7 := $(wildcard man/*.7)
INSTALL_MODULE := $(if $(filter 1,$(BUILD_CUDA)),$(CUDA_MODULE))

# the bash completion, one file per tool where bash-completion looks for it
COMPLETIONS := $(PREFIX)/share/bash-completion/completions

## install: install the tools, ncf-plot, the cuda module (PREFIX/lib/ncf), man pages and bash completion under $(DESTDIR)$(PREFIX)
install: $(TOOL_BINS) $(INSTALL_MODULE)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7 \
		$(DESTDIR)$(COMPLETIONS)
	install -m 755 $(TOOL_BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 755 scripts/plot.sh $(DESTDIR)$(PREFIX)/bin/ncf-plot
	for t in $(TOOLS); do install -m 644 scripts/ncf-completion.bash $(DESTDIR)$(COMPLETIONS)/$$t; done
	$(if $(INSTALL_MODULE),install -d $(DESTDIR)$(PREFIX)/lib/ncf)
	$(if $(INSTALL_MODULE),install -m 755 $(INSTALL_MODULE) $(DESTDIR)$(PREFIX)/lib/ncf/)
	$(if $(MAN1),install -m 644 $(MAN1) $(DESTDIR)$(PREFIX)/share/man/man1/)
	$(if $(MAN5),install -m 644 $(MAN5) $(DESTDIR)$(PREFIX)/share/man/man5/)
	$(if $(MAN7),install -m 644 $(MAN7) $(DESTDIR)$(PREFIX)/share/man/man7/)

## uninstall: remove what install installed
uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(TOOLS) ncf-plot)
	rm -f $(addprefix $(DESTDIR)$(COMPLETIONS)/,$(TOOLS))
	rm -f $(DESTDIR)$(PREFIX)/lib/ncf/ncf-cuda.so
	-rmdir $(DESTDIR)$(PREFIX)/lib/ncf 2>/dev/null
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man1/,$(notdir $(MAN1)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man5/,$(notdir $(MAN5)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/share/man/man7/,$(notdir $(MAN7)))

## clean: remove build/
clean:
	rm -rf $(BUILD)

## help: list the targets
help:
	@sed -n 's/^## \([a-z0-9-]*\): /  \1\t/p' $(MAKEFILE_LIST) | expand -t 16

.PHONY: all tools check check-asan check-gpu check-nodes check-slurm bench-nodes demo bench ml-20m \
	plot install uninstall clean help fuzz fuzz-safetensors check-fuzz cuda gpu-bundle
.SECONDARY:
.DELETE_ON_ERROR:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
