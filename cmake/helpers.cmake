# Shared pieces for fluxion's own tests, examples and benchmarks (never for consumers).
include_guard(GLOBAL)
include(CheckCXXCompilerFlag)

# Flags for fluxion's own programs. Not installed or exported: the interface target stays clean.
add_library(fluxion_dev_flags INTERFACE)
target_link_libraries(fluxion_dev_flags INTERFACE fluxion::fluxion)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(fluxion_dev_flags INTERFACE -Wall -Wextra)
endif()
if(FLUXION_NATIVE)
  check_cxx_compiler_flag(-march=native FLUXION_HAVE_MARCH_NATIVE)
  if(FLUXION_HAVE_MARCH_NATIVE)
    # A program that sets its own FLUXION_MARCH property (tests of older vector sets) gets that.
    target_compile_options(fluxion_dev_flags INTERFACE
      "-march=$<IF:$<BOOL:$<TARGET_PROPERTY:FLUXION_MARCH>>,$<TARGET_PROPERTY:FLUXION_MARCH>,native>")
  endif()
endif()

# clang++, for the clang.* tests (clang.example.* in examples.cmake, consumer.add_subdirectory_clang
# in tests.cmake), where the build's own compiler is another one.
# FLUXION_CLANG_CHECK_FLAGS: their flags; each adds its -O level and its source.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  find_program(FLUXION_CLANGXX NAMES clang++ DOC "clang++ for the clang.* tests")
endif()
set(FLUXION_CLANG_CHECK_FLAGS -std=c++20 -Wall -Wextra -Werror -fsyntax-only "-I${PROJECT_SOURCE_DIR}/include")
if(FLUXION_HAVE_MARCH_NATIVE)
  list(APPEND FLUXION_CLANG_CHECK_FLAGS -march=native)
endif()

# fluxion_add_program(<target> <source> <output dir> <output name>): an executable of fluxion's own,
# placed at <output dir>/<output name>.
function(fluxion_add_program target source output_dir output_name)
  add_executable(${target} "${source}")
  target_link_libraries(${target} PRIVATE fluxion_dev_flags)
  set_target_properties(${target} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY "${output_dir}"
    OUTPUT_NAME "${output_name}")
endfunction()
