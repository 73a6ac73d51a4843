# fluxion's tests. Every kind is found by file name, so adding a test never touches CMake:
#
#   tests/<area>/<concept>.test.cpp   doctest unit test, its own executable     ctest: <area>.<concept>
#   tests/backend/cuda/<name>.test.cpp device-generic test: built by the host compiler against
#                                      Thrust's OpenMP device system and run   ctest: backend.cuda.<name>
#                                      and, where nvcc exists, compiled by nvcc
#                                      with its group (one file per group)      ctest: nvcc.order0, nvcc.tape
#   bench/cuda/<name>.bench.cu         GPU benchmark, compiled by nvcc         ctest: nvcc.bench_<name>
#   tests/compile_fail/<name>.cpp      must NOT compile; its first line is
#                                      `// expect-error: <regex>`              ctest: compile_fail.<name>
#                                      (and `// not-expected: <regex>` among its
#                                      first five lines: what must not show)
#   tests/consumer/                    find_package and add_subdirectory users ctest: consumer.*
#
# Labels: unit, device, nvcc, compile_time, compile_fail, consumer (and example), for `ctest -L` / `ctest -LE`.
include_guard(GLOBAL)

find_package(doctest CONFIG REQUIRED)

set(FLUXION_TESTS_DIR "${PROJECT_SOURCE_DIR}/tests")
# Device suites built with the tape's higher orders (the list scripts/run-gpu-tests.sh reads too).
file(STRINGS "${FLUXION_TESTS_DIR}/backend/cuda/tape_suites.txt" fluxion_cuda_tape_suites REGEX "^[a-z_0-9]+$")
list(JOIN fluxion_cuda_tape_suites "|" fluxion_cuda_tape_regex)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${FLUXION_TESTS_DIR}/backend/cuda/tape_suites.txt")
set(FLUXION_TESTS_BINARY_DIR "${PROJECT_BINARY_DIR}/tests")

# The doctest main is compiled once and shared by every test executable.
add_library(fluxion_doctest_main STATIC "${FLUXION_TESTS_DIR}/doctest_main.cpp")
target_link_libraries(fluxion_doctest_main PUBLIC doctest::doctest)
target_compile_features(fluxion_doctest_main PUBLIC cxx_std_20)

# Precompiled headers (tests/precompiled.hpp: the standard headers and xsimd that
# <fluxion/tensor.hpp> includes, and doctest). A precompiled header serves only compiles with the
# same flags, so there is one per group of tests that share them: -O0 (most), -O1 (backend.cpu.*) and
# the device tests (OpenMP). Each is built by a small object library of its own, so that no test
# waits for another test's build. The FLUXION_* macros a test sets do not matter: no header in it
# reads them. ccache caches such compiles only with the sloppiness below.
set(fluxion_test_launcher "${CMAKE_CXX_COMPILER_LAUNCHER}")
if(fluxion_test_launcher MATCHES "ccache")
  set(fluxion_test_launcher "${CMAKE_COMMAND}" -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime" ${fluxion_test_launcher})
endif()
file(CONFIGURE OUTPUT "${FLUXION_TESTS_BINARY_DIR}/precompiled.cpp"  # (unchanged: untouched)
     CONTENT "// The object library that builds a precompiled header for tests (cmake/tests.cmake).\n" @ONLY)

# fluxion_test_precompiled_header(<test target> <group> <extra libraries>...): the group's header.
function(fluxion_test_precompiled_header target group)
  set(owner fluxion_test_pch_${group})
  if(NOT TARGET ${owner})
    add_library(${owner} OBJECT "${FLUXION_TESTS_BINARY_DIR}/precompiled.cpp")
    # doctest's headers and C++20, as fluxion_doctest_main gives the tests; only the other groups'
    # headers wait for that library's build ("Build order" below).
    target_link_libraries(${owner} PRIVATE fluxion_dev_flags doctest::doctest ${ARGN})
    target_compile_features(${owner} PRIVATE cxx_std_20)
    if(NOT group STREQUAL "device")
      add_dependencies(${owner} fluxion_doctest_main)
    endif()
    target_compile_definitions(${owner} PRIVATE "FLUXION_TEST_FIXTURES_DIR=\"${FLUXION_TESTS_DIR}/fixtures\"")
    target_compile_options(${owner} PRIVATE $<IF:$<STREQUAL:${group},o1>,-O1,-O0>)
    target_precompile_headers(${owner} PRIVATE "${FLUXION_TESTS_DIR}/precompiled.hpp")
    set_target_properties(${owner} PROPERTIES CXX_COMPILER_LAUNCHER "${fluxion_test_launcher}")
  endif()
  target_precompile_headers(${target} REUSE_FROM ${owner})
  set_target_properties(${target} PROPERTIES CXX_COMPILER_LAUNCHER "${fluxion_test_launcher}")
  fluxion_precompiled_header_warnings(${target})  # cmake/build_time.cmake
endfunction()

# fluxion_test_flag_group(<ctest name> <out var>): the group of tests built with the same flags:
#   o1             backend.cpu.*: the kernel tests, at -O1, without autodiff
#   device_tape    backend.cuda.<a tape suite>: Thrust's OpenMP system, the default derivative order
#   device_order0  the other backend.cuda.*: Thrust's OpenMP system, without autodiff
#   autodiff       autodiff.*: the default derivative order, forward mode on
#   model          nn, optim, losses, metrics, io, fit: the default derivative order
#   order0         everything else: without autodiff
# Every floating-point statement instantiates its backward and forward functions
# (autodiff/record.hpp). Tests of everything else leave autodiff out to keep CI fast; the tests
# under tests/autodiff/ and the device autodiff test build with the default order, or set their own.
# Forward mode is opt-in (FLUXION_FORWARD_MODE); the autodiff tests check it for every op.
# The model layer (nn, optim, losses, metrics) is differentiated in its tests, so it keeps the
# default order too.
function(fluxion_test_flag_group name out_var)
  if(name MATCHES "^backend\\.cpu\\.")
    set(group o1)
  elseif(name MATCHES "^backend\\.cuda\\.(${fluxion_cuda_tape_regex})$")
    set(group device_tape)
  elseif(name MATCHES "^backend\\.cuda\\.")
    set(group device_order0)
  elseif(name MATCHES "^autodiff\\.")
    set(group autodiff)
  elseif(name MATCHES "^(nn|optim|losses|metrics|io|fit|distributed)(\\.|$)")
    set(group model)
  else()
    set(group order0)
  endif()
  set(${out_var} ${group} PARENT_SCOPE)
endfunction()

# fluxion_test_program_flags(<target> <ctest name> [NO_PCH] [LINK <libraries>...]): the flags of a
# test program whose tests are named like <ctest name> (a batch's programs take its first test's).
# NO_PCH: the test sets flags of its own (FLUXION_MARCH), or tests headers that include less than
# <fluxion/tensor.hpp> (tests/core).
function(fluxion_test_program_flags target name)
  cmake_parse_arguments(PARSE_ARGV 2 arg "NO_PCH" "" "LINK")
  fluxion_test_flag_group(${name} group)
  target_link_libraries(${target} PRIVATE fluxion_doctest_main ${arg_LINK})
  if(NOT arg_NO_PCH AND NOT name MATCHES "^core\\.")
    if(group STREQUAL "o1")
      fluxion_test_precompiled_header(${target} o1)
    elseif(group MATCHES "^device_")
      fluxion_test_precompiled_header(${target} device ${arg_LINK})
    else()
      fluxion_test_precompiled_header(${target} o0)
    endif()
  endif()
  # Tests need correct code, not the fastest. Without optimization they build in about 60% of
  # their time at -O1 (40% for the autodiff tests), and the whole suite runs in seconds anyway.
  # The kernel tests (backend.cpu.*) keep -O1: they test the vector code a Release build runs,
  # AVX-512 included (an unoptimized build uses AVX2, backend/cpu/detail/simd_arch.hpp).
  if(group STREQUAL "o1")
    target_compile_options(${target} PRIVATE -O1)
  else()
    target_compile_options(${target} PRIVATE -O0)
  endif()
  # Committed peer fixtures (.npy from PyTorch) are found through FLUXION_TEST_FIXTURES_DIR.
  target_compile_definitions(${target} PRIVATE "FLUXION_TEST_FIXTURES_DIR=\"${FLUXION_TESTS_DIR}/fixtures\"")
  if(group MATCHES "^(o1|device_order0|order0)$")
    target_compile_definitions(${target} PRIVATE FLUXION_MAX_DERIVATIVE_ORDER=0)
  elseif(group STREQUAL "autodiff")
    target_compile_definitions(${target} PRIVATE FLUXION_FORWARD_MODE=1)
  endif()
endfunction()

# fluxion_write_unity(<file> <first line> <sources>...): a translation unit that includes the sources
# in turn (file(CONFIGURE) leaves it untouched, so no rebuild, when nothing changed).
function(fluxion_write_unity file first_line)
  set(content "${first_line}\n")
  foreach(source IN LISTS ARGN)
    string(APPEND content "#include \"${source}\"\n")
  endforeach()
  file(CONFIGURE OUTPUT "${file}" CONTENT "${content}")
endfunction()

# The composition matrix at order 1 builds under a time limit (see "Compile-time tests" below), four
# files to a program: 8 files took 119 CPU s as one translation unit and about 215 s as eight (AVX-512,
# stop 55), since every outer kind shares the inner ops' statements and the checks' code. Seconds one
# such program's build may take: about 65 s on an AVX-512 runner, 150 s on a slower one.
set(FLUXION_COMPOSITION_BUILD_LIMIT 900)
set(FLUXION_COMPOSITION_BATCH_SIZE 4)
# fluxion_limit_build_time(<target>): builds the target under FLUXION_COMPOSITION_BUILD_LIMIT.
function(fluxion_limit_build_time target)
  set(launcher "${CMAKE_COMMAND}" "-DLIMIT=${FLUXION_COMPOSITION_BUILD_LIMIT}" -P
               "${PROJECT_SOURCE_DIR}/cmake/time_limited_compile.cmake" --)
  get_target_property(inner ${target} CXX_COMPILER_LAUNCHER)
  if(inner)
    list(APPEND launcher ${inner})
  endif()
  set_target_properties(${target} PROPERTIES CXX_COMPILER_LAUNCHER "${launcher}")
endfunction()

# fluxion_add_doctest(<ctest name> <source> [NO_PCH] [LINK <libraries>...] [LABELS <labels>...]):
# a test file as a program of its own (target test_<name with _ for .>, build/tests/<name>).
# LAUNCHER: the command ctest runs the program under (mpiexec for tests/distributed).
function(fluxion_add_doctest name source)
  cmake_parse_arguments(PARSE_ARGV 2 arg "NO_PCH" "" "LINK;LABELS;LAUNCHER")
  string(REPLACE "." "_" target "test_${name}")
  fluxion_add_program(${target} "${source}" "${FLUXION_TESTS_BINARY_DIR}" "${name}")
  set(no_pch "")
  if(arg_NO_PCH)
    set(no_pch NO_PCH)
  endif()
  fluxion_test_program_flags(${target} ${name} ${no_pch} LINK ${arg_LINK})
  if(name MATCHES "^autodiff\\.composition_")
    fluxion_limit_build_time(${target})
  endif()
  add_test(NAME ${name} COMMAND ${arg_LAUNCHER} $<TARGET_FILE:${target}>)
  set_tests_properties(${name} PROPERTIES LABELS "${arg_LABELS}" TIMEOUT 120)
endfunction()

# --- Batches ---------------------------------------------------------------------------------------
# A test program's compile time is mostly instantiating and generating the same tensor, evaluator,
# tape and layer templates that the next test program instantiates again. With FLUXION_TEST_BATCHES
# (the default), test files that are compiled with the same flags and the same FLUXION_* macros
# (the `#define` and `#undef` lines a file starts with) are compiled together, up to
# FLUXION_TEST_BATCH_SIZE files as one translation unit and one program, build/tests/batch.<group>.<n>
# (groups: order0, model, autodiff, o1, device_order0, device_tape; fluxion_test_program_flags).
# Eight nn test files took 68 s as one unit against 149 s as eight (bench/RESULTS-compile.md, stop
# 52). The files stay small and each one is still a test of its own: ctest runs `batch.model.6
# --source-file=*/tests/nn/dense.test.cpp` as nn.dense, and a program run with a filter that
# matches no test case fails (tests/doctest_main.cpp). The build target test_<name> builds the
# batch that holds <name>, so `cmake --build build --target test_nn_dense` still works.
# -DFLUXION_TEST_BATCHES=OFF builds one program per file (build/tests/<name>): an edit then
# recompiles one file instead of its batch, and a test file that misses an #include shows.
# Not batched: tests/core (they check that headers stand alone) and files whose macros no other file
# shares. The composition matrix batches among itself (above).
option(FLUXION_TEST_BATCHES "Compile test files that share their flags together, a few per program" ON)
set(FLUXION_TEST_BATCH_SIZE 8 CACHE STRING "Most test files in one batch (FLUXION_TEST_BATCHES)")
# fluxion_batch_doctest(<ctest name> <source> [LINK <libraries>...] [LABELS <labels>...]): adds the
# test to a batch (or, without FLUXION_TEST_BATCHES or for the files above, as a program of its own).
# The batches are made by fluxion_add_test_batches() once every test has been named.
function(fluxion_batch_doctest name source)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "LINK;LABELS")
  if(NOT FLUXION_TEST_BATCHES OR name MATCHES "^core\\.")
    fluxion_add_doctest(${name} "${source}" LINK ${arg_LINK} LABELS ${arg_LABELS})
    return()
  endif()
  # The flag group, the libraries, the labels and the file's macros.
  fluxion_test_flag_group(${name} group)
  file(STRINGS "${source}" macros REGEX "^#[ \t]*(define|undef)[ \t]+FLUXION_")
  # <fluxion/testing/check_gradients.hpp> turns forward mode on when it comes before any other
  # fluxion header; in a batch another file's headers may come first. Such a file says so itself.
  file(STRINGS "${source}" includes REGEX "^#[ \t]*include" LIMIT_COUNT 1)
  if(includes MATCHES "check_gradients\\.hpp" AND NOT macros MATCHES "FLUXION_FORWARD_MODE")
    message(FATAL_ERROR "${source}: its first #include is <fluxion/testing/check_gradients.hpp>, which "
                        "turns forward mode on only where it comes first; in a batch of tests "
                        "(FLUXION_TEST_BATCHES) it may not. Define FLUXION_FORWARD_MODE (0 or 1) before it.")
  endif()
  set(normalized "")
  foreach(line IN LISTS macros)
    string(REGEX REPLACE "[ \t]*//.*$" "" line "${line}")
    string(REGEX REPLACE "[ \t]+" " " line "${line}")
    list(APPEND normalized "${line}")
  endforeach()
  # The composition matrix's files batch among themselves, four to a program, under a time limit.
  set(kind "")
  if(name MATCHES "^autodiff\\.composition_")
    set(kind composition)
  endif()
  string(MD5 key "${group}|${arg_LINK}|${arg_LABELS}|${normalized}|${kind}")
  set(key "${group}_${key}")
  get_property(keys GLOBAL PROPERTY FLUXION_TEST_BATCH_KEYS)
  if(NOT key IN_LIST keys)
    set_property(GLOBAL APPEND PROPERTY FLUXION_TEST_BATCH_KEYS ${key})
    set_property(GLOBAL PROPERTY FLUXION_TEST_BATCH_${key}_LINK "${arg_LINK}")
    set_property(GLOBAL PROPERTY FLUXION_TEST_BATCH_${key}_LABELS "${arg_LABELS}")
    set_property(GLOBAL PROPERTY FLUXION_TEST_BATCH_${key}_GROUP ${group})
    set_property(GLOBAL PROPERTY FLUXION_TEST_BATCH_${key}_KIND "${kind}")
  endif()
  set_property(GLOBAL APPEND PROPERTY FLUXION_TEST_BATCH_${key}_NAMES ${name})
  set_property(GLOBAL APPEND PROPERTY FLUXION_TEST_BATCH_${key}_SOURCES "${source}")
endfunction()

# fluxion_add_test_batches(): the programs and tests of the batches named so far.
function(fluxion_add_test_batches)
  get_property(keys GLOBAL PROPERTY FLUXION_TEST_BATCH_KEYS)
  set_property(GLOBAL PROPERTY FLUXION_TEST_BATCH_KEYS "")
  foreach(key IN LISTS keys)
    foreach(field IN ITEMS names sources link labels group kind)
      string(TOUPPER ${field} property)
      get_property(${field} GLOBAL PROPERTY FLUXION_TEST_BATCH_${key}_${property})
      set_property(GLOBAL PROPERTY FLUXION_TEST_BATCH_${key}_${property} "")
    endforeach()
    list(LENGTH names count)
    if(count EQUAL 1)  # a file whose macros no other file shares
      fluxion_add_doctest(${names} "${sources}" LINK ${link} LABELS ${labels})
      continue()
    endif()
    # As many batches as the size allows, as even as they can be.
    set(most ${FLUXION_TEST_BATCH_SIZE})
    if(kind STREQUAL "composition")
      set(most ${FLUXION_COMPOSITION_BATCH_SIZE})
    endif()
    math(EXPR batches "(${count} + ${most} - 1) / ${most}")
    math(EXPR size "(${count} + ${batches} - 1) / ${batches}")
    math(EXPR last "${count} - 1")
    set(members "")
    set(member_sources "")
    foreach(i RANGE ${last})
      list(GET names ${i} name)
      list(GET sources ${i} source)
      list(APPEND members "${name}")
      list(APPEND member_sources "${source}")
      math(EXPR position "${i} + 1")
      if(NOT position EQUAL count)
        math(EXPR full "${position} % ${size}")
        if(NOT full EQUAL 0)
          continue()
        endif()
      endif()
      # A full batch (or the last): one translation unit that includes its files in turn.
      list(GET members 0 first)
      get_property(number GLOBAL PROPERTY FLUXION_TEST_BATCHES_OF_${group})
      math(EXPR number "0${number} + 1")
      set_property(GLOBAL PROPERTY FLUXION_TEST_BATCHES_OF_${group} ${number})
      set(target test_batch_${group}_${number})
      set(unity "${FLUXION_TESTS_BINARY_DIR}/batches/${group}.${number}.cpp")
      fluxion_write_unity("${unity}" "// Generated by cmake/tests.cmake (FLUXION_TEST_BATCHES): test files compiled as one program."
                          ${member_sources})
      fluxion_add_program(${target} "${unity}" "${FLUXION_TESTS_BINARY_DIR}" "batch.${group}.${number}")
      fluxion_test_program_flags(${target} ${first} LINK ${link})
      if(kind STREQUAL "composition")
        fluxion_limit_build_time(${target})
      endif()
      if(NOT TARGET test_testing_batch_selects_nothing)  # the guard in tests/doctest_main.cpp
        add_custom_target(test_testing_batch_selects_nothing)  # its build target, as every test has
        add_dependencies(test_testing_batch_selects_nothing ${target})
        add_test(NAME testing.batch_selects_nothing COMMAND ${target} "--source-file=*/tests/no/such.test.cpp")
        set_tests_properties(testing.batch_selects_nothing PROPERTIES LABELS unit TIMEOUT 60
          PASS_REGULAR_EXPRESSION "no test case matched the filters")
      endif()
      foreach(member member_source IN ZIP_LISTS members member_sources)
        file(RELATIVE_PATH relative "${PROJECT_SOURCE_DIR}" "${member_source}")
        add_test(NAME ${member} COMMAND ${target} "--source-file=*/${relative}")
        set_tests_properties(${member} PROPERTIES LABELS "${labels}" TIMEOUT 120)
        string(REPLACE "." "_" alias "test_${member}")
        add_custom_target(${alias})
        add_dependencies(${alias} ${target})
      endforeach()
      set(members "")
      set(member_sources "")
    endforeach()
  endforeach()
endfunction()

# --- Build order -----------------------------------------------------------------------------------
# The device tape batch is the longest compile of all (about 120 s on an AVX-512 runner, 280 s on a
# slower one). Declared last, it was the build's tail, with the other core idle for a minute or
# more. With Makefiles and `--parallel`, make walks the targets in the order they are declared; one
# whose prerequisites are still building when make reaches it waits for make's next walk, after
# every target of this walk has started. On the first walk every test waits for the doctest main,
# which builds first, and the examples build. The second walk meets the device tests first, and
# their precompiled header, which alone does not wait for the doctest main, was built in the first
# walk: the batch starts then, and the rest of the tests build beside it (stop 55).
file(GLOB_RECURSE fluxion_test_sources CONFIGURE_DEPENDS "${FLUXION_TESTS_DIR}/*.test.cpp")
list(SORT fluxion_test_sources)
set(fluxion_device_test_sources "")
foreach(source IN LISTS fluxion_test_sources)
  file(RELATIVE_PATH relative "${FLUXION_TESTS_DIR}" "${source}")
  if(relative MATCHES "^backend/cuda/")
    list(APPEND fluxion_device_test_sources "${source}")
  endif()
endforeach()

# --- Device-generic tests --------------------------------------------------------------------------
# The CUDA backend is written against Thrust. With the host compiler, Thrust's OpenMP device system
# runs the same code on the CPU, so the device path is tested on machines without a GPU.

find_package(OpenMP QUIET COMPONENTS CXX)
if(TARGET fluxion::cuda)
  set(fluxion_thrust_target fluxion::cuda)           # CCCL from the CUDA toolkit
else()
  find_path(FLUXION_THRUST_INCLUDE_DIR thrust/version.h)  # Debian's libthrust-dev
  if(FLUXION_THRUST_INCLUDE_DIR)
    add_library(fluxion_system_thrust INTERFACE)
    target_include_directories(fluxion_system_thrust SYSTEM INTERFACE "${FLUXION_THRUST_INCLUDE_DIR}")
    target_link_libraries(fluxion_system_thrust INTERFACE fluxion::fluxion)
    set(fluxion_thrust_target fluxion_system_thrust)
  endif()
endif()

if(fluxion_device_test_sources AND (NOT fluxion_thrust_target OR NOT TARGET OpenMP::OpenMP_CXX))
  message(WARNING "fluxion: tests/backend/cuda is skipped: it needs Thrust (the CUDA toolkit, or "
                  "libthrust-dev and libcub-dev) and OpenMP.")
  set(fluxion_device_test_sources "")
endif()
if(fluxion_device_test_sources)
  add_library(fluxion_thrust_omp INTERFACE)
  target_link_libraries(fluxion_thrust_omp INTERFACE ${fluxion_thrust_target} OpenMP::OpenMP_CXX)
  target_compile_definitions(fluxion_thrust_omp INTERFACE THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP)
endif()

# fluxion_dependency_include_flags(<out var>): -I flags for the headers of fluxion's dependencies and
# doctest, for tests that run a compiler by hand, minus the compiler's implicit directories (an
# explicit -I/usr/include breaks the #include_next chain of libstdc++).
function(fluxion_dependency_include_flags out_var)
  set(flags "")
  foreach(dependency IN ITEMS doctest::doctest xtensor xsimd xtl)
    if(TARGET ${dependency})
      get_target_property(dirs ${dependency} INTERFACE_INCLUDE_DIRECTORIES)
      foreach(dir IN LISTS dirs)
        if(dir AND NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
          list(APPEND flags "-I${dir}")
        endif()
      endforeach()
    endif()
  endforeach()
  set(${out_var} ${flags} PARENT_SCOPE)
endfunction()

find_program(FLUXION_NVCC nvcc HINTS /usr/local/cuda/bin "$ENV{CUDA_PATH}/bin")
include(CMakeDependentOption)
cmake_dependent_option(FLUXION_NVCC_TESTS "Compile tests/backend/cuda with nvcc (compile only)" ON
                       "FLUXION_NVCC" OFF)
if(FLUXION_NVCC_TESTS)
  # nvcc gets the include directories the host build uses, minus the compiler's implicit ones:
  # an explicit -I/usr/include breaks the #include_next chain of libstdc++.
  # Calling a __host__ function from host-device code is only a warning in nvcc (20011, 20014), but
  # it is a real bug on a GPU: make it an error. constexpr functions of the standard library
  # (std::max, std::numeric_limits) are allowed in device code, as fluxion::cuda allows them.
  # The test checks that the code compiles, not how fast it runs: compute_<arch> makes PTX only
  # (ptxas would double a test's time and rarely finds what cicc missed), and -Xcicc -O0 cuts
  # cicc's time about threefold on template-heavy files.
  set(FLUXION_NVCC_TEST_ARCH 80 CACHE STRING "GPU architecture the nvcc compile tests target")
  set(fluxion_nvcc_flags -std=c++20 -x cu --extended-lambda --expt-relaxed-constexpr
                         -diag-error=20011,20014 -arch=compute_${FLUXION_NVCC_TEST_ARCH} -Xcicc -O0
                         "-I${PROJECT_SOURCE_DIR}/include")
  fluxion_dependency_include_flags(dependency_flags)
  list(APPEND fluxion_nvcc_flags ${dependency_flags})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND fluxion_nvcc_flags -ccbin "${CMAKE_CXX_COMPILER}")
  endif()
  list(REMOVE_DUPLICATES fluxion_nvcc_flags)
  # cuDNN's header beside nvcc's toolkit: the tape group (window, nn) compiles the cuDNN path too.
  get_filename_component(fluxion_nvcc_root "${FLUXION_NVCC}" DIRECTORY)
  find_path(FLUXION_NVCC_CUDNN_INCLUDE_DIR cudnn.h HINTS "${fluxion_nvcc_root}/../include" NO_DEFAULT_PATH)
  # The device tests stop where nvcc hands the host side to the host compiler (-cuda): cudafe++ has
  # parsed and checked the host code, and cicc has compiled the device code to PTX, which is what
  # can break under nvcc alone. The host compiler's pass over cudafe++'s output took a third of each
  # test's time; the example below still goes through it, to an object file.
endif()

set(fluxion_nvcc_group_order0 "")
set(fluxion_nvcc_group_tape "")
foreach(source IN LISTS fluxion_device_test_sources)
  get_filename_component(file_name "${source}" NAME)
  string(REGEX REPLACE "\\.test\\.cpp$" "" name "${file_name}")
  fluxion_batch_doctest(backend.cuda.${name} "${source}" LINK fluxion_thrust_omp LABELS device)
  if(name MATCHES "^(${fluxion_cuda_tape_regex})$")  # the tape on the device; models trained there
    list(APPEND fluxion_nvcc_group_tape "${source}")
  else()
    list(APPEND fluxion_nvcc_group_order0 "${source}")  # -DFLUXION_MAX_DERIVATIVE_ORDER=0, as their host build
  endif()
endforeach()
fluxion_add_test_batches()

foreach(source IN LISTS fluxion_test_sources)
  file(RELATIVE_PATH relative "${FLUXION_TESTS_DIR}" "${source}")
  if(relative MATCHES "^(compile_fail|consumer|backend/cuda|distributed)/")
    continue()
  endif()
  string(REGEX REPLACE "\\.test\\.cpp$" "" stem "${relative}")
  string(REPLACE "/" "." name "${stem}")
  set(link "")
  if(name MATCHES "^data\\." AND TARGET fluxion::zlib)
    set(link fluxion::zlib)  # the data tests read .gz files
  endif()
  fluxion_batch_doctest(${name} "${source}" LINK ${link} LABELS unit)
endforeach()
fluxion_add_test_batches()

# tests/autodiff/mixed_settings: units compiled without autodiff (order0.cpp), with the autodiff
# tests' settings (order1.cpp) and at second order (order2.cpp) in one program, linked in two
# orders, 0 1 2 and 2 1 0: the linker keeps the copy of the code two units instantiate that comes
# first on its command line, so each order checks that no unit's copy decides what another unit's
# statements record (stop 68).
set(fluxion_mixed_dir "${FLUXION_TESTS_DIR}/autodiff/mixed_settings")
foreach(unit IN ITEMS order0 order1 order2)
  add_library(fluxion_test_mixed_${unit} OBJECT "${fluxion_mixed_dir}/${unit}.cpp")
  target_link_libraries(fluxion_test_mixed_${unit} PRIVATE fluxion_dev_flags doctest::doctest)
  target_compile_options(fluxion_test_mixed_${unit} PRIVATE -O0)  # calls, not inlined copies
  set_target_properties(fluxion_test_mixed_${unit} PROPERTIES CXX_COMPILER_LAUNCHER "${fluxion_test_launcher}")
endforeach()
target_compile_definitions(fluxion_test_mixed_order1 PRIVATE FLUXION_FORWARD_MODE=1)
foreach(first IN ITEMS order0 order2)
  set(units order0 order1 order2)
  if(first STREQUAL "order2")
    list(REVERSE units)
  endif()
  set(objects "")
  foreach(unit IN LISTS units)
    list(APPEND objects $<TARGET_OBJECTS:fluxion_test_mixed_${unit}>)
  endforeach()
  set(target test_autodiff_mixed_settings_${first}_first)
  add_executable(${target} ${objects})
  target_link_libraries(${target} PRIVATE fluxion_dev_flags fluxion_doctest_main)
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${FLUXION_TESTS_BINARY_DIR}"
                                             OUTPUT_NAME "autodiff.mixed_settings.${first}_first")
  add_test(NAME autodiff.mixed_settings.${first}_first COMMAND ${target})
  set_tests_properties(autodiff.mixed_settings.${first}_first PROPERTIES LABELS unit TIMEOUT 120)
endforeach()

# tests/distributed: each file a program of its own, run by mpiexec as two processes (with Open
# MPI's flags for more processes than cores, and for root in a container, as CI runs).
if(TARGET fluxion::mpi)
  find_package(MPI QUIET COMPONENTS CXX)  # its variables (fluxion::mpi was made in a function's scope)
endif()
if(TARGET fluxion::mpi AND MPIEXEC_EXECUTABLE)
  set(fluxion_mpi_launcher ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2)
  if(MPI_CXX_LIBRARY_VERSION_STRING MATCHES "Open MPI")
    list(APPEND fluxion_mpi_launcher --oversubscribe)
  endif()
  list(APPEND fluxion_mpi_launcher ${MPIEXEC_PREFLAGS})
  set(fluxion_mpi_environment OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1)
  file(GLOB fluxion_distributed_tests CONFIGURE_DEPENDS "${FLUXION_TESTS_DIR}/distributed/*.test.cpp")
  foreach(source IN LISTS fluxion_distributed_tests)
    get_filename_component(file_name "${source}" NAME)
    string(REGEX REPLACE "\\.test\\.cpp$" "" stem "${file_name}")
    fluxion_add_doctest(distributed.${stem} "${source}" LINK fluxion::mpi LABELS unit LAUNCHER ${fluxion_mpi_launcher})
    set_tests_properties(distributed.${stem} PROPERTIES ENVIRONMENT "${fluxion_mpi_environment}" PROCESSORS 2)
  endforeach()
  # A process that leaves on an exception while the other waits ends the job (MPI_Abort) instead of
  # leaving it waiting: the test passes on the abort's message, and a hang fails it by its timeout.
  fluxion_add_program(test_distributed_abort "${FLUXION_TESTS_DIR}/distributed/abort_on_exception.cpp"
                      "${FLUXION_TESTS_BINARY_DIR}" distributed.abort_on_exception)
  target_link_libraries(test_distributed_abort PRIVATE fluxion::mpi)
  add_test(NAME distributed.abort_on_exception COMMAND ${fluxion_mpi_launcher} $<TARGET_FILE:test_distributed_abort>)
  set_tests_properties(distributed.abort_on_exception PROPERTIES ENVIRONMENT "${fluxion_mpi_environment}" PROCESSORS 2
                       TIMEOUT 60 LABELS unit PASS_REGULAR_EXPRESSION "process 1 is leaving on an exception; aborting the job")
else()
  message(STATUS "fluxion: MPI not found (scripts/install-deps.sh installs Open MPI): the tests of <fluxion/distributed.hpp> are not built")
endif()

# The SIMD kernels again for the older x86 vector sets, since -march=native picks the build
# machine's widest (AVX-512 or AVX2) and users may build for less: baseline x86-64 (SSE2) and AVX2.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  foreach(isa IN ITEMS sse2 avx2)
    set(march x86-64)
    if(isa STREQUAL "avx2")
      set(march haswell)
    endif()
    fluxion_add_doctest(backend.cpu.simd_ops_${isa} "${FLUXION_TESTS_DIR}/backend/cpu/simd_ops.test.cpp" NO_PCH LABELS unit)
    set_target_properties(test_backend_cpu_simd_ops_${isa} PROPERTIES FLUXION_MARCH ${march})
    # A program built for less than the machine has gets a notice from the thread pool.
    fluxion_add_doctest(backend.cpu.detail.isa_notice_${isa} "${FLUXION_TESTS_DIR}/backend/cpu/detail/isa_notice.test.cpp"
                        NO_PCH LABELS unit)
    set_target_properties(test_backend_cpu_detail_isa_notice_${isa} PROPERTIES FLUXION_MARCH ${march})
  endforeach()
endif()


# nvcc compiles the device tests in two translation units, one per derivative order the host builds
# use, each including its group's test files in turn: every nvcc run parses Thrust, the standard
# headers and fluxion before it reaches a test, which was more than half of each file's time. A
# failure names the test file in the compiler's message.
if(FLUXION_NVCC_TESTS)
  foreach(group IN ITEMS order0 tape)
    set(unity "${FLUXION_TESTS_BINARY_DIR}/nvcc_${group}.cu.cpp")
    fluxion_write_unity("${unity}" "// Generated by cmake/tests.cmake: the device tests nvcc.${group} compiles as one translation unit."
                        ${fluxion_nvcc_group_${group}})
    set(order_flag "")
    if(group STREQUAL "order0")
      set(order_flag -DFLUXION_MAX_DERIVATIVE_ORDER=0)
    elseif(FLUXION_NVCC_CUDNN_INCLUDE_DIR)
      set(order_flag -DFLUXION_USE_CUDNN=1)  # the cuDNN convolutions, as GPU builds have them
    endif()
    add_test(NAME nvcc.${group}
             COMMAND "${FLUXION_NVCC}" ${fluxion_nvcc_flags} ${order_flag} -cuda "${unity}" -o /dev/null)
    # The slowest tests: a high COST makes ctest start them first.
    set_tests_properties(nvcc.${group} PROPERTIES LABELS nvcc TIMEOUT 1200 COST 1000)
  endforeach()
endif()

# The training example's GPU path (examples/fashion_mnist_cnn.cpp --device cuda), compiled by nvcc
# as the device tests are, and on through the host compiler to an object file, as a user's build
# goes; scripts/run-gpu-tests.sh builds it for a GPU and trains with it there. The object file is
# kept (not -o /dev/null) so that ccache, when it is the launcher, can cache it.
if(FLUXION_NVCC_TESTS)
  add_test(NAME nvcc.example_fashion_mnist_cnn
           COMMAND ${CMAKE_CXX_COMPILER_LAUNCHER} "${FLUXION_NVCC}" ${fluxion_nvcc_flags}
                   -c "${PROJECT_SOURCE_DIR}/examples/fashion_mnist_cnn.cpp"
                   -o "${FLUXION_TESTS_BINARY_DIR}/nvcc.example_fashion_mnist_cnn.o")
  set_tests_properties(nvcc.example_fashion_mnist_cnn PROPERTIES LABELS nvcc TIMEOUT 900 COST 1000)
endif()

# The GPU benchmarks (bench/cuda/*.bench.cu), which only scripts/run-gpu-benchmarks.sh builds for a
# GPU, compiled by nvcc as the device tests are (to PTX and cudafe++'s host pass, 13-17 s each), so
# that a library change that breaks them fails here rather than on a lent GPU: until stop 69,
# kernels.bench.cu had not compiled since the tape-visible reshape's static_assert, and no build
# said so. Needs Google Benchmark's header (scripts/install-deps.sh).
find_path(FLUXION_BENCHMARK_INCLUDE_DIR benchmark/benchmark.h)
if(FLUXION_NVCC_TESTS AND FLUXION_BENCHMARK_INCLUDE_DIR)
  set(bench_cudnn_flag "")
  if(FLUXION_NVCC_CUDNN_INCLUDE_DIR)
    set(bench_cudnn_flag -DFLUXION_USE_CUDNN=1)  # the cuDNN routes the benchmarks time
  endif()
  file(GLOB fluxion_cuda_bench_sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/bench/cuda/*.bench.cu")
  foreach(source IN LISTS fluxion_cuda_bench_sources)
    get_filename_component(name "${source}" NAME_WE)
    add_test(NAME nvcc.bench_${name}
             COMMAND "${FLUXION_NVCC}" ${fluxion_nvcc_flags} ${bench_cudnn_flag} -cuda "${source}" -o /dev/null)
    set_tests_properties(nvcc.bench_${name} PROPERTIES LABELS nvcc TIMEOUT 900 COST 500)
  endforeach()
endif()

# --- Compile-time tests ----------------------------------------------------------------------------
# The composition matrix (tests/autodiff/composition.hpp) compiles at derivative orders 1 and 2 with
# forward mode, each under a time limit, so that template instantiation that never ends (as
# reduce_sum(gather(x, i) * 2) once did) fails by name instead of hanging a build:
#   - order 1: the builds of the batches that hold autodiff.composition_* (FLUXION_COMPOSITION_BUILD_LIMIT,
#     cmake/time_limited_compile.cmake), which then run every composition's checks;
#   - order 2: compile_time.composition_<outers>_order2, the compiler's front end alone over four
#     files at a time, 300 s each.
# (Until stop 25 an order-1 front-end test repeated each build's front end as well.)

# The compiler's front end as a fluxion::fluxion user runs it: the compile-time and compile-fail tests.
fluxion_dependency_include_flags(fluxion_syntax_flags)
set(fluxion_front_end_flags -std=c++20 -fsyntax-only "-I${PROJECT_SOURCE_DIR}/include" ${fluxion_syntax_flags})
# The same flags with the standard headers and xsimd precompiled (tests/precompiled.hpp without
# doctest), built once with these flags: about 1-2 s less for each of these tests. Where the .gch is
# missing (ctest before a build), the compiler reads the header itself.
set(fluxion_front_end_pch_dir "${FLUXION_TESTS_BINARY_DIR}/front_end_pch")
# file(CONFIGURE) leaves an unchanged file alone, where file(WRITE) rewrote it at every configure:
# clang then refused the .gch, built before the header's new modification time.
file(CONFIGURE OUTPUT "${fluxion_front_end_pch_dir}/precompiled.hpp"
     CONTENT "#define FLUXION_PRECOMPILED_FRONT_END\n#include \"${FLUXION_TESTS_DIR}/precompiled.hpp\"\n" @ONLY)
set(fluxion_front_end_pch_flags ${fluxion_front_end_flags})
list(REMOVE_ITEM fluxion_front_end_pch_flags -fsyntax-only)
add_custom_command(
  OUTPUT "${fluxion_front_end_pch_dir}/precompiled.hpp.gch"
  COMMAND "${CMAKE_CXX_COMPILER}" ${fluxion_front_end_pch_flags} -x c++-header
          "${fluxion_front_end_pch_dir}/precompiled.hpp" -o "${fluxion_front_end_pch_dir}/precompiled.hpp.gch"
  DEPENDS "${FLUXION_TESTS_DIR}/precompiled.hpp" "${fluxion_front_end_pch_dir}/precompiled.hpp"
  COMMENT "Precompiling tests/precompiled.hpp for the compile-time and compile-fail tests" VERBATIM)
add_custom_target(fluxion_front_end_pch ALL DEPENDS "${fluxion_front_end_pch_dir}/precompiled.hpp.gch")
set(fluxion_front_end_flags_pch ${fluxion_front_end_flags} -Winvalid-pch -include "${fluxion_front_end_pch_dir}/precompiled.hpp")
file(GLOB fluxion_composition_sources CONFIGURE_DEPENDS "${FLUXION_TESTS_DIR}/autodiff/composition_*.test.cpp")
list(SORT fluxion_composition_sources)
# Four files to a front-end run, as their order-1 builds: four took 15.8 CPU s together against
# 36.8 s one by one (AVX-512, stop 55). The test's name lists its outer kinds:
# compile_time.composition_concat_conv_elementwise_gather_order2.
list(LENGTH fluxion_composition_sources fluxion_composition_count)
set(fluxion_composition_group "")
set(fluxion_composition_outers "")
set(fluxion_composition_index 0)
foreach(source IN LISTS fluxion_composition_sources)
  get_filename_component(file_name "${source}" NAME)
  string(REGEX REPLACE "^composition_(.*)\\.test\\.cpp$" "\\1" outer "${file_name}")
  list(APPEND fluxion_composition_group "${source}")
  string(APPEND fluxion_composition_outers "_${outer}")
  math(EXPR fluxion_composition_index "${fluxion_composition_index} + 1")
  list(LENGTH fluxion_composition_group size)
  if(size EQUAL FLUXION_COMPOSITION_BATCH_SIZE OR fluxion_composition_index EQUAL fluxion_composition_count)
    set(name "compile_time.composition${fluxion_composition_outers}_order2")
    set(unity "${FLUXION_TESTS_BINARY_DIR}/compile_time/composition${fluxion_composition_outers}_order2.cpp")
    fluxion_write_unity("${unity}" "// Generated by cmake/tests.cmake: the composition matrix's front end at order 2, four outer kinds at a time."
                        ${fluxion_composition_group})
    add_test(NAME ${name}
             COMMAND "${CMAKE_CXX_COMPILER}" ${fluxion_front_end_flags_pch} -DFLUXION_FORWARD_MODE=1
                     -DFLUXION_MAX_DERIVATIVE_ORDER=2 "${unity}")
    set_tests_properties(${name} PROPERTIES LABELS compile_time TIMEOUT 300)
    set(fluxion_composition_group "")
    set(fluxion_composition_outers "")
  endif()
endforeach()

# An unoptimized build for the build machine's own vector set, as a CMake Debug build of a user's
# program: xsimd's AVX-512 kernels do not compile through g++'s intrinsics without optimization, so
# such a build uses AVX2 (backend/cpu/detail/simd_arch.hpp). Two examples that use every kernel
# family, through the front end at -O0 -march=native.
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang" AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  foreach(example IN ITEMS mnist_models fashion_mnist_cnn)
    add_test(NAME compile_time.unoptimized_native_${example}
             COMMAND "${CMAKE_CXX_COMPILER}" ${fluxion_front_end_flags} -O0 -march=native
                     "${PROJECT_SOURCE_DIR}/examples/${example}.cpp")
    set_tests_properties(compile_time.unoptimized_native_${example} PROPERTIES LABELS compile_time TIMEOUT 180)
  endforeach()
endif()

# -I flags for <mpi.h>, for the front-end checks of <fluxion/distributed.hpp> (empty without MPI).
list(TRANSFORM MPI_CXX_INCLUDE_DIRS PREPEND "-I" OUTPUT_VARIABLE fluxion_mpi_include_flags)

# --- Self-contained headers -----------------------------------------------------------------------
# Every header compiles when a program includes it first and alone: compile_time.self_contained_<area>,
# one test per folder of include/fluxion (and one for the facades), each header through the front end
# without a precompiled header, so that a header that forgets one of its includes, standard or
# fluxion's, fails by name. (Until stop 70, 21 headers, nn/lstm.hpp among them, did not compile
# first: the expression and autodiff headers include one another.) <fluxion/distributed.hpp> needs
# <mpi.h> and the CUDA headers need Thrust: their areas are checked where those are found.
file(GLOB_RECURSE fluxion_public_headers RELATIVE "${PROJECT_SOURCE_DIR}/include" CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/include/fluxion/*.hpp")
list(SORT fluxion_public_headers)
set(fluxion_header_areas "")
foreach(header IN LISTS fluxion_public_headers)
  string(REGEX REPLACE "^fluxion/([a-z_]+)/.*$" "\\1" area "${header}")
  if(area STREQUAL header)
    set(area facades)
  endif()
  if(header MATCHES "^fluxion/(cuda|backend/cuda/)")
    set(area cuda)
  elseif(header MATCHES "^fluxion/distributed")
    set(area distributed)
  endif()
  list(APPEND fluxion_headers_${area} "${header}")
  list(APPEND fluxion_header_areas ${area})
endforeach()
list(REMOVE_DUPLICATES fluxion_header_areas)
foreach(area IN LISTS fluxion_header_areas)
  set(flags ${fluxion_front_end_flags})
  if(area STREQUAL "distributed")
    if(NOT TARGET fluxion::mpi)
      continue()
    endif()
    list(APPEND flags ${fluxion_mpi_include_flags})
  elseif(area STREQUAL "cuda")
    if(NOT TARGET fluxion_thrust_omp OR NOT TARGET OpenMP::OpenMP_CXX)
      continue()
    endif()
    list(APPEND flags -fopenmp -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP
         "-I$<JOIN:$<TARGET_PROPERTY:${fluxion_thrust_target},INTERFACE_INCLUDE_DIRECTORIES>,;-I>")
  endif()
  add_test(NAME compile_time.self_contained_${area}
           COMMAND "${CMAKE_COMMAND}" "-DCOMPILER=${CMAKE_CXX_COMPILER}" "-DFLAGS=${flags}"
                   "-DHEADERS=${fluxion_headers_${area}}"
                   "-DWORK_DIR=${FLUXION_TESTS_BINARY_DIR}/self_contained/${area}"
                   -P "${PROJECT_SOURCE_DIR}/cmake/check_headers.cmake")
  set_tests_properties(compile_time.self_contained_${area} PROPERTIES LABELS compile_time TIMEOUT 600)
endforeach()

# --- Compile-fail tests ----------------------------------------------------------------------------
# Each file must NOT compile: the test runs the compiler's front end on it (-fsyntax-only, with the
# include directories a fluxion::fluxion user gets) and passes only if the compile FAILS and its
# output matches the file's `// expect-error:` regex (cmake/check_compile_fail.cmake). A file that
# compiles fails its test. The front end is where every static_assert fires; going through the
# build tree instead cost each test a build-system check and serialized them all on one lock.

file(GLOB fluxion_compile_fail_sources CONFIGURE_DEPENDS "${FLUXION_TESTS_DIR}/compile_fail/*.cpp")
list(SORT fluxion_compile_fail_sources)
foreach(source IN LISTS fluxion_compile_fail_sources)
  get_filename_component(name "${source}" NAME_WLE)
  file(STRINGS "${source}" first_line LIMIT_COUNT 1)
  if(NOT first_line MATCHES "^// expect-error: .+")
    message(FATAL_ERROR "fluxion: ${source} must start with `// expect-error: <regex>`")
  endif()
  set(flags "${fluxion_front_end_flags_pch}")
  if(name STREQUAL "distributed_without_mpi")  # where <mpi.h> is on the compiler's own path, it has it
    if(NOT DEFINED fluxion_mpi_on_default_path)
      include(CheckIncludeFileCXX)
      check_include_file_cxx(mpi.h fluxion_mpi_on_default_path)
    endif()
    if(fluxion_mpi_on_default_path)
      continue()
    endif()
  elseif(name MATCHES "^distributed_")  # <fluxion/distributed.hpp> needs <mpi.h>
    if(NOT TARGET fluxion::mpi)
      continue()
    endif()
    list(APPEND flags ${fluxion_mpi_include_flags})
  endif()
  add_test(NAME compile_fail.${name}
           COMMAND "${CMAKE_COMMAND}" "-DCOMPILER=${CMAKE_CXX_COMPILER}"
                   "-DFLAGS=${flags}"
                   "-DSOURCE=${source}" -P "${PROJECT_SOURCE_DIR}/cmake/check_compile_fail.cmake")
  set_tests_properties(compile_fail.${name} PROPERTIES LABELS compile_fail TIMEOUT 300)
  # A test that says what must not follow its message (`// not-expected:`) runs under clang too:
  # clang goes on instantiating after a failed static_assert where g++ often stops, so most of the
  # cascades these tests rule out showed under clang only.
  file(STRINGS "${source}" head_lines LIMIT_COUNT 5)
  list(FILTER head_lines INCLUDE REGEX "^// not-expected: ")
  if(FLUXION_CLANGXX AND head_lines)
    set(clang_flags -std=c++20 -fsyntax-only "-I${PROJECT_SOURCE_DIR}/include")
    if(name MATCHES "^distributed_")
      list(APPEND clang_flags ${fluxion_mpi_include_flags})
    endif()
    add_test(NAME clang.compile_fail.${name}
             COMMAND "${CMAKE_COMMAND}" "-DCOMPILER=${FLUXION_CLANGXX}" "-DFLAGS=${clang_flags}"
                     "-DSOURCE=${source}" -P "${PROJECT_SOURCE_DIR}/cmake/check_compile_fail.cmake")
    set_tests_properties(clang.compile_fail.${name} PROPERTIES LABELS "compile_fail;clang" TIMEOUT 300)
  endif()
endforeach()

# --- Consumer tests --------------------------------------------------------------------------------
# Real projects that use fluxion the two supported ways, configured and built from scratch.

set(fluxion_consumer_args
  "-DGENERATOR=${CMAKE_GENERATOR}" "-DCXX_COMPILER=${CMAKE_CXX_COMPILER}" "-DCONFIG=$<CONFIG>"
  "-DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}" "-DFLUXION_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
if(FLUXION_INSTALL)
  add_test(NAME consumer.find_package
           COMMAND "${CMAKE_COMMAND}" -DMODE=find_package ${fluxion_consumer_args} -DCONSUMER_CONFIG=Debug
                   "-DFLUXION_BUILD_DIR=${PROJECT_BINARY_DIR}"
                   "-DWORK_DIR=${FLUXION_TESTS_BINARY_DIR}/consumer/find_package"
                   -P "${PROJECT_SOURCE_DIR}/cmake/run_consumer.cmake")
  set_tests_properties(consumer.find_package PROPERTIES LABELS consumer TIMEOUT 600)
endif()
# Both consumers build Debug, as a user's program is built while it is being written: unoptimized,
# which caps AVX-512 at AVX2 (backend/cpu/detail/simd_arch.hpp). It is also the stricter test of
# fluxion_target_prebuilt_kernels: without optimization nothing is inlined, so every extern kernel a
# program reaches must be in the library. (The examples are the Release programs; the find_package
# consumer was Release until stop 25, which cost CI about 110 CPU-s.)
add_test(NAME consumer.add_subdirectory
         COMMAND "${CMAKE_COMMAND}" -DMODE=add_subdirectory ${fluxion_consumer_args} -DCONSUMER_CONFIG=Debug
                 "-DWORK_DIR=${FLUXION_TESTS_BINARY_DIR}/consumer/add_subdirectory"
                 -P "${PROJECT_SOURCE_DIR}/cmake/run_consumer.cmake")
set_tests_properties(consumer.add_subdirectory PROPERTIES LABELS consumer TIMEOUT 600)
# The vendoring project again with clang (where the build's compiler is not clang; see
# clang.example.* in cmake/examples.cmake): fluxion's compiled parts (src/), the precompiled
# header and the prebuilt kernels, built and run as a clang user's project builds them.
if(FLUXION_CLANGXX)  # cmake/helpers.cmake
  add_test(NAME consumer.add_subdirectory_clang
           COMMAND "${CMAKE_COMMAND}" -DMODE=add_subdirectory "-DGENERATOR=${CMAKE_GENERATOR}"
                   "-DCXX_COMPILER=${FLUXION_CLANGXX}" "-DCONFIG=$<CONFIG>" "-DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}"
                   "-DFLUXION_SOURCE_DIR=${PROJECT_SOURCE_DIR}" -DCONSUMER_CONFIG=Debug
                   "-DWORK_DIR=${FLUXION_TESTS_BINARY_DIR}/consumer/add_subdirectory_clang"
                   -P "${PROJECT_SOURCE_DIR}/cmake/run_consumer.cmake")
  set_tests_properties(consumer.add_subdirectory_clang PROPERTIES LABELS "consumer;clang" TIMEOUT 600)
  # The test file of the one API that takes another path under clang (tape.gradient's brace lists,
  # docs/building.md, "Compilers"), compiled by clang as clang.example.* are (cmake/examples.cmake).
  add_test(NAME clang.autodiff.tape COMMAND "${FLUXION_CLANGXX}" ${FLUXION_CLANG_CHECK_FLAGS} -O1 "-I${FLUXION_TESTS_DIR}"
                                            "${FLUXION_TESTS_DIR}/autodiff/tape.test.cpp")
  set_tests_properties(clang.autodiff.tape PROPERTIES LABELS clang TIMEOUT 300)
endif()
