# fluxion's optional targets, each defined only when what it needs is found:
#
#   fluxion::blas   links CBLAS (OpenBLAS preferred) and defines FLUXION_USE_CBLAS=1
#   fluxion::cuda   adds the CCCL (Thrust, CUB, libcu++) include directory of the CUDA toolkit, and
#                   cuBLAS to programs whose sources nvcc compiles
#   fluxion::zlib   links ZLIB::ZLIB and defines FLUXION_HAS_ZLIB=1: fluxion::data reads .gz files
#   fluxion::mpi    links MPI::MPI_CXX: <fluxion/distributed.hpp>, data-parallel training over MPI
#
# All link fluxion::fluxion, so `target_link_libraries(app PRIVATE fluxion::blas)` is enough.
# The build tree (with GLOBAL, so a parent project sees them after add_subdirectory) and the
# installed fluxionConfig.cmake both call fluxion_define_optional_targets, so the detection is
# written once.
include_guard(GLOBAL)

function(fluxion_define_optional_targets)
  set(scope "")
  if(ARGV0 STREQUAL "GLOBAL")
    set(scope GLOBAL)
  endif()

  if(NOT TARGET fluxion::blas)
    set(blas_libraries "")
    set(blas_include_dir "")
    find_package(OpenBLAS CONFIG QUIET)
    if(OpenBLAS_FOUND AND OpenBLAS_LIBRARIES)
      find_path(FLUXION_CBLAS_INCLUDE_DIR cblas.h HINTS ${OpenBLAS_INCLUDE_DIRS})
      set(blas_libraries ${OpenBLAS_LIBRARIES})
    else()
      set(BLA_VENDOR OpenBLAS)
      find_package(BLAS QUIET)
      if(NOT BLAS_FOUND)
        unset(BLA_VENDOR)
        find_package(BLAS QUIET)
      endif()
      if(BLAS_FOUND)
        find_path(FLUXION_CBLAS_INCLUDE_DIR cblas.h)
        set(blas_libraries ${BLAS_LIBRARIES})
      endif()
    endif()
    if(blas_libraries AND FLUXION_CBLAS_INCLUDE_DIR)
      add_library(fluxion::blas INTERFACE IMPORTED ${scope})
      set_target_properties(fluxion::blas PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${FLUXION_CBLAS_INCLUDE_DIR}"
        INTERFACE_LINK_LIBRARIES "fluxion::fluxion;${blas_libraries}"
        INTERFACE_COMPILE_DEFINITIONS "FLUXION_USE_CBLAS=1")
    endif()
  endif()

  if(NOT TARGET fluxion::cuda)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      # CUDA 13 keeps CCCL under include/cccl; CUDA 12 and older put it directly in include/.
      find_path(FLUXION_CCCL_INCLUDE_DIR thrust/version.h
        HINTS "${CUDAToolkit_INCLUDE_DIRS}/cccl" ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
      if(FLUXION_CCCL_INCLUDE_DIR)
        add_library(fluxion::cuda INTERFACE IMPORTED ${scope})
        set_target_properties(fluxion::cuda PROPERTIES
          INTERFACE_INCLUDE_DIRECTORIES "${FLUXION_CCCL_INCLUDE_DIR}"
          # cuBLAS serves float and double fx::matmul in programs compiled by nvcc.
          INTERFACE_LINK_LIBRARIES "fluxion::fluxion;$<$<LINK_LANGUAGE:CUDA>:CUDA::cublas>"
          # Device lambdas, and standard constexpr functions (std::max, std::numeric_limits) in
          # device code; applies only to sources compiled as CUDA.
          INTERFACE_COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda>;$<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>")
        # cuDNN, where the toolkit has it, runs conv2d and its gradients in CUDA sources
        # (backend/cuda/cudnn.hpp); -DFLUXION_CUDNN=OFF keeps them on im2col + cuBLAS.
        if(NOT DEFINED FLUXION_CUDNN OR FLUXION_CUDNN)
          find_path(FLUXION_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
          find_library(FLUXION_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
          if(FLUXION_CUDNN_INCLUDE_DIR AND FLUXION_CUDNN_LIBRARY)
            set_property(TARGET fluxion::cuda APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS
                         "$<$<COMPILE_LANGUAGE:CUDA>:FLUXION_USE_CUDNN=1>")
            set_property(TARGET fluxion::cuda APPEND PROPERTY INTERFACE_LINK_LIBRARIES
                         "$<$<LINK_LANGUAGE:CUDA>:${FLUXION_CUDNN_LIBRARY}>")
          endif()
        endif()
      endif()
    endif()
  endif()

  if(NOT TARGET fluxion::zlib)
    find_package(ZLIB QUIET)
    if(ZLIB_FOUND AND TARGET ZLIB::ZLIB)
      if(scope STREQUAL "GLOBAL")
        get_target_property(zlib_imported ZLIB::ZLIB IMPORTED)
        get_target_property(zlib_global ZLIB::ZLIB IMPORTED_GLOBAL)
        if(zlib_imported AND NOT zlib_global)
          set_target_properties(ZLIB::ZLIB PROPERTIES IMPORTED_GLOBAL TRUE)  # seen by a parent project too
        endif()
      endif()
      add_library(fluxion::zlib INTERFACE IMPORTED ${scope})
      set_target_properties(fluxion::zlib PROPERTIES
        INTERFACE_LINK_LIBRARIES "fluxion::fluxion;ZLIB::ZLIB"
        INTERFACE_COMPILE_DEFINITIONS "FLUXION_HAS_ZLIB=1")
    endif()
  endif()

  if(NOT TARGET fluxion::mpi)
    find_package(MPI QUIET COMPONENTS CXX)  # CXX: fluxion's projects enable no C compiler
    if(MPI_CXX_FOUND AND TARGET MPI::MPI_CXX)
      if(scope STREQUAL "GLOBAL")
        get_target_property(mpi_global MPI::MPI_CXX IMPORTED_GLOBAL)
        if(NOT mpi_global)
          set_target_properties(MPI::MPI_CXX PROPERTIES IMPORTED_GLOBAL TRUE)
        endif()
      endif()
      add_library(fluxion::mpi INTERFACE IMPORTED ${scope})
      set_target_properties(fluxion::mpi PROPERTIES INTERFACE_LINK_LIBRARIES "fluxion::fluxion;MPI::MPI_CXX")
    endif()
  endif()
endfunction()
