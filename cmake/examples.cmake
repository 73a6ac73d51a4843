# fluxion's examples, which are also tests (docs that compile and run):
#
#   examples/<name>.cpp    executable build/examples/<name> (target example_<name>)  ctest: example.<name>
#   README.md              the first ```cpp block after the `## Quickstart` heading
#                          becomes build/examples/readme_quickstart.cpp             ctest: example.readme_quickstart
#                          (and after `## Gradients`, readme_gradients.cpp)        ctest: example.readme_gradients
#   examples/<name>.args   optional: the arguments the test runs the example with (one line), e.g.
#                          a short training run where the example alone trains for minutes
#   examples/<name>.expected  optional, for either kind: one CMake regex per line (blank lines and
#                          `#` lines ignored) that the output (stdout and stderr) must match, in order,
#                          each after the previous one's match (cmake/check_output.cmake). Without
#                          it, a test checks only the exit code. It is read when the test runs, so
#                          editing it needs no re-configure.
#
# Examples run with build/examples as their working directory, so what they write stays there.
include_guard(GLOBAL)

set(FLUXION_EXAMPLES_BINARY_DIR "${PROJECT_BINARY_DIR}/examples")
file(MAKE_DIRECTORY "${FLUXION_EXAMPLES_BINARY_DIR}")

# clang.example.<name>: the same program compiled by clang as well, where the build's compiler is
# not clang and clang++ is installed (scripts/install-deps.sh installs Debian 12's, clang 14), with
# -Wall -Wextra -Werror. -fsyntax-only: clang instantiates every template the program reaches and
# checks it, and generates no code, which keeps the check to a few seconds of CPU per program. The
# whole test suite also passes under clang 14 (docs/building.md, "Compilers"), but CI builds it
# with g++ only.
function(fluxion_add_clang_check name source)
  if(NOT FLUXION_CLANGXX)  # cmake/helpers.cmake
    return()
  endif()
  add_test(NAME clang.example.${name} COMMAND "${FLUXION_CLANGXX}" ${FLUXION_CLANG_CHECK_FLAGS} -O2 "${source}")
  set_tests_properties(clang.example.${name} PROPERTIES LABELS clang TIMEOUT 300)
endfunction()

# Examples named *_distributed use <fluxion/distributed.hpp>: built where MPI is found, and run by
# mpiexec as two processes.
function(fluxion_add_example name source)
  set(launcher "")
  if(name MATCHES "_distributed$")
    if(NOT TARGET fluxion::mpi)
      message(STATUS "fluxion: MPI not found: examples/${name}.cpp is not built")
      return()
    endif()
    find_package(MPI QUIET COMPONENTS CXX)
    set(launcher "${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2")
    if(MPI_CXX_LIBRARY_VERSION_STRING MATCHES "Open MPI")
      string(APPEND launcher " --oversubscribe")
    endif()
  endif()
  fluxion_add_program(example_${name} "${source}" "${FLUXION_EXAMPLES_BINARY_DIR}" "${name}")
  # -O2, not Release's -O3: -O3 took 1.6x the compile time (examples/mnist_models.cpp, g++ 12,
  # AVX2: 89 s against 56 s) for no faster training (fashion_mnist_cnn, 200 steps: 13.8 / 12.2 s at
  # -O3 against 13.6 / 11.2 s at -O2), since fluxion's hot loops are explicit SIMD kernels. The
  # examples are what `scripts/run-example.sh` builds first, and every CI run builds all of them.
  target_compile_options(example_${name} PRIVATE $<$<CONFIG:Release>:-O2>)
  # The examples are the programs users start from: they compile without a warning under -Wall
  # -Wextra (g++ 12 with AVX-512 once printed pages of false uninitialized-variable warnings from
  # xsimd's intrinsics, see backend/cpu/detail/xsimd.hpp).
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(example_${name} PRIVATE -Werror)
  endif()
  if(TARGET fluxion::zlib)
    target_link_libraries(example_${name} PRIVATE fluxion::zlib)  # the data sets' .gz files
  endif()
  if(launcher)
    target_link_libraries(example_${name} PRIVATE fluxion::mpi)
  endif()
  add_test(NAME example.${name}
           COMMAND "${CMAKE_COMMAND}" "-DPROGRAM=$<TARGET_FILE:example_${name}>" "-DLAUNCHER=${launcher}"
                   "-DEXPECTED=${PROJECT_SOURCE_DIR}/examples/${name}.expected"
                   "-DARGS_FILE=${PROJECT_SOURCE_DIR}/examples/${name}.args"
                   "-DWORKING_DIRECTORY=${FLUXION_EXAMPLES_BINARY_DIR}"
                   -P "${PROJECT_SOURCE_DIR}/cmake/check_output.cmake"
           WORKING_DIRECTORY "${FLUXION_EXAMPLES_BINARY_DIR}")
  set_tests_properties(example.${name} PROPERTIES LABELS example TIMEOUT 600)
  if(launcher)
    set_tests_properties(example.${name} PROPERTIES PROCESSORS 2
                         ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  else()
    fluxion_add_clang_check(${name} "${source}")
  endif()
endfunction()

file(GLOB fluxion_example_sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/examples/*.cpp")
list(SORT fluxion_example_sources)
foreach(source IN LISTS fluxion_example_sources)
  get_filename_component(name "${source}" NAME_WLE)
  fluxion_add_example(${name} "${source}")
endforeach()

# The README's programs: the first ```cpp block after the `## Quickstart` heading and after the
# `## Gradients` heading. Editing README.md re-runs the configure step, so the tests follow the docs.
function(fluxion_add_readme_program heading name)
  set(readme "${PROJECT_SOURCE_DIR}/README.md")
  if(NOT EXISTS "${readme}")
    return()
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${readme}")
  file(READ "${readme}" text)
  string(PREPEND text "\n")
  string(FIND "${text}" "\n${heading}\n" at)
  set(code "")
  if(at GREATER_EQUAL 0)
    string(SUBSTRING "${text}" ${at} -1 text)
    string(FIND "${text}" "\n```cpp\n" fence)
    if(fence GREATER_EQUAL 0)
      math(EXPR start "${fence} + 8")
      string(SUBSTRING "${text}" ${start} -1 text)
      string(FIND "${text}" "\n```" end)
      if(end GREATER_EQUAL 0)
        math(EXPR end "${end} + 1")
        string(SUBSTRING "${text}" 0 ${end} code)
      endif()
    endif()
  endif()
  if(code STREQUAL "")
    message(WARNING "fluxion: README.md has no ```cpp block after a `${heading}` heading; "
                    "example.${name} is not built.")
    return()
  endif()
  set(program "${FLUXION_EXAMPLES_BINARY_DIR}/${name}.cpp")
  # Written through configure_file, which leaves the file untouched (no rebuild) if unchanged.
  file(WRITE "${program}.in" "// Extracted from README.md (${heading}). Edit README.md, not this file.\n${code}")
  configure_file("${program}.in" "${program}" COPYONLY)
  fluxion_add_example(${name} "${program}")
endfunction()

fluxion_add_readme_program("## Quickstart" readme_quickstart)
fluxion_add_readme_program("## Gradients" readme_gradients)
