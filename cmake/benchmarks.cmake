# fluxion's benchmarks: each bench/<name>.bench.cpp becomes build/bench/<name> (target bench_<name>),
# linked with Google Benchmark's main, so a bench file registers benchmarks and defines no main().
# The peers a user would otherwise pick are measured in the same run when they are found:
#
#   FLUXION_BENCH_HAVE_OPENBLAS=1   OpenBLAS/CBLAS is linked and <cblas.h> is on the include path
#   FLUXION_BENCH_HAVE_TORCH=1      LibTorch is linked (<torch/torch.h>)
#
# Test them with `#if FLUXION_BENCH_HAVE_TORCH`: each macro is defined only when its peer is found.
# Benchmarks do not define FLUXION_USE_CBLAS, so fluxion's own kernels are the ones measured.
# `cmake --build build --target fluxion_benchmarks` builds them all.
include_guard(GLOBAL)

find_package(benchmark CONFIG REQUIRED)
option(FLUXION_BENCH_WITH_TORCH "Compare against LibTorch in the benchmarks when it is found" ON)
if(FLUXION_BENCH_WITH_TORCH)
  find_package(Torch QUIET)
endif()

add_custom_target(fluxion_benchmarks)
file(GLOB fluxion_bench_sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/bench/*.bench.cpp")
list(SORT fluxion_bench_sources)
foreach(source IN LISTS fluxion_bench_sources)
  get_filename_component(file_name "${source}" NAME)
  string(REGEX REPLACE "\\.bench\\.cpp$" "" name "${file_name}")
  set(target bench_${name})
  if(name STREQUAL "distributed" AND NOT TARGET fluxion::mpi)
    message(STATUS "fluxion: MPI not found: bench/distributed.bench.cpp is not built")
    continue()
  endif()
  fluxion_add_program(${target} "${source}" "${PROJECT_BINARY_DIR}/bench" "${name}")
  if(name STREQUAL "distributed")
    # Its own main (MPI first, and one process reporting); LibTorch's Gloo process group as the peer.
    target_link_libraries(${target} PRIVATE benchmark::benchmark fluxion::mpi)
    find_library(FLUXION_GLOO_LIBRARY gloo)
    if(FLUXION_GLOO_LIBRARY)
      target_link_libraries(${target} PRIVATE ${FLUXION_GLOO_LIBRARY})
    endif()
  else()
    target_link_libraries(${target} PRIVATE benchmark::benchmark benchmark::benchmark_main)
  endif()
  if(TARGET fluxion::blas)
    # The CBLAS library and header of fluxion::blas, without its FLUXION_USE_CBLAS switch.
    get_target_property(blas_libraries fluxion::blas INTERFACE_LINK_LIBRARIES)
    list(REMOVE_ITEM blas_libraries fluxion::fluxion)
    get_target_property(blas_include_dirs fluxion::blas INTERFACE_INCLUDE_DIRECTORIES)
    target_link_libraries(${target} PRIVATE ${blas_libraries})
    target_include_directories(${target} SYSTEM PRIVATE ${blas_include_dirs})
    target_compile_definitions(${target} PRIVATE FLUXION_BENCH_HAVE_OPENBLAS=1)
  endif()
  if(TARGET fluxion::zlib)
    target_link_libraries(${target} PRIVATE fluxion::zlib)  # the data sets' .gz files (epoch.bench.cpp)
  endif()
  if(Torch_FOUND)
    target_link_libraries(${target} PRIVATE ${TORCH_LIBRARIES})
    target_compile_definitions(${target} PRIVATE FLUXION_BENCH_HAVE_TORCH=1)
  endif()
  add_dependencies(fluxion_benchmarks ${target})
endforeach()
