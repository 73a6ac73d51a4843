# Levers on the compile time of programs that use fluxion (docs/benchmarks.md, "Compile time"):
#
#   fluxion_target_prebuilt_kernels(app [LIBRARY name] [ACTIVATIONS] [SIMPLE_RNN] [NO_GRU])
#                                           compile fluxion's GEMM, convolution and pooling kernels
#                                           (src/kernels.cpp), the model layer's float statements
#                                           (src/nn_kernels.cpp: dense, conv2d, pooling, LSTM, sparse
#                                           cross-entropy, optimizer updates; src/nn_gru_kernels.cpp:
#                                           nn::gru, unless NO_GRU; with ACTIVATIONS also
#                                           src/nn_activation_kernels.cpp: dense and conv2d with elu,
#                                           selu, leaky_relu, relu6, silu, softplus, softsign and
#                                           mish, 13 CPU s more; with SIMPLE_RNN also
#                                           src/nn_simple_rnn_kernels.cpp: nn::simple_rnn, stop
#                                           84) and the checkpoint and safetensors
#                                           code (src/io.cpp) once, in a static library of app's
#                                           own, instead of in every translation unit
#                                           (FLUXION_PREBUILT_KERNELS). With LIBRARY, every target
#                                           that names the same library shares one (built with the
#                                           first one's compile options): a project of several
#                                           programs compiles the kernels once, not once per
#                                           program. The GRU's set is in by default since stop 53
#                                           (a program with a GRU that lacked it compiled 22 s
#                                           longer per edit, and the keyword that adds it was easy
#                                           to miss); NO_GRU leaves it out of a library no program
#                                           with a GRU uses (its first build about 10 s shorter on 2
#                                           cores), and GRU, which used to add it, is still accepted
#   fluxion_target_precompile_headers(app)  a precompiled header of <fluxion/fluxion.hpp> for app
#
# Both work the same in fluxion's build tree (add_subdirectory) and from an installed package
# (find_package), whose fluxionConfig.cmake includes this file.
include_guard(GLOBAL)

# Where src/kernels.cpp is: the source tree, or the installed copy (set by fluxionConfig.cmake).
if(NOT FLUXION_KERNELS_SOURCE)
  set(FLUXION_KERNELS_SOURCE "${CMAKE_CURRENT_LIST_DIR}/../src/kernels.cpp")
endif()
get_filename_component(FLUXION_KERNELS_SOURCE "${FLUXION_KERNELS_SOURCE}" ABSOLUTE)
set_property(GLOBAL PROPERTY FLUXION_KERNELS_SOURCE "${FLUXION_KERNELS_SOURCE}")

function(fluxion_target_prebuilt_kernels target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "ACTIVATIONS;SIMPLE_RNN;GRU;NO_GRU" "LIBRARY" "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "fluxion_target_prebuilt_kernels: unexpected arguments `${arg_UNPARSED_ARGUMENTS}` "
                        "(usage: fluxion_target_prebuilt_kernels(<target> [LIBRARY <name>] [ACTIVATIONS] [SIMPLE_RNN] "
                        "[NO_GRU]))")
  endif()
  if(arg_GRU AND arg_NO_GRU)
    message(FATAL_ERROR "fluxion_target_prebuilt_kernels(${target} ...): GRU and NO_GRU contradict each other "
                        "(the GRU's statements are in the library by default; NO_GRU leaves them out)")
  endif()
  if(NOT arg_NO_GRU)
    set(arg_GRU ON)
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "fluxion_target_prebuilt_kernels: `${target}` is not a target")
  endif()
  get_property(source GLOBAL PROPERTY FLUXION_KERNELS_SOURCE)
  if(NOT EXISTS "${source}")
    message(FATAL_ERROR "fluxion_target_prebuilt_kernels: ${source} is missing")
  endif()
  get_filename_component(source_dir "${source}" DIRECTORY)
  set(library ${target}_fluxion_kernels)
  if(arg_LIBRARY)
    set(library ${arg_LIBRARY})
  endif()
  if(NOT TARGET ${library})
    # nn_kernels.cpp, the optional sources below and io.cpp sit beside kernels.cpp (in the source
    # tree and in the installed package).
    add_library(${library} STATIC "${source}" "${source_dir}/nn_kernels.cpp" "${source_dir}/io.cpp")
    target_link_libraries(${library} PRIVATE fluxion::fluxion)
    # The program's own compile options (its -march above all), so that both sides of the link
    # were compiled for the same vector width.
    target_compile_options(${library} PRIVATE $<TARGET_PROPERTY:${target},COMPILE_OPTIONS>)
    set_target_properties(${library} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
  # The optional sets: keyword, source, and the definition that makes the program's declarations
  # of them extern.
  foreach(set IN ITEMS "ACTIVATIONS;nn_activation_kernels.cpp" "GRU;nn_gru_kernels.cpp"
                       "SIMPLE_RNN;nn_simple_rnn_kernels.cpp")
    list(GET set 0 keyword)
    list(GET set 1 file)
    if(arg_${keyword})
      # A shared library that an earlier program made without the set gets it now.
      get_target_property(has_set ${library} FLUXION_${keyword})
      if(NOT has_set)
        target_sources(${library} PRIVATE "${source_dir}/${file}")
        set_target_properties(${library} PROPERTIES FLUXION_${keyword} ON)
      endif()
      target_compile_definitions(${target} PRIVATE FLUXION_PREBUILT_${keyword})
    endif()
  endforeach()
  target_compile_definitions(${target} PRIVATE FLUXION_PREBUILT_KERNELS)
  target_link_libraries(${target} PRIVATE ${library})
endfunction()

# fluxion_target_precompile_headers(target [facade...]): a precompiled header of <fluxion/fluxion.hpp>
# for target, and of the facades named after it that are not in the umbrella header: data,
# checkpoint, tensorboard, io, xtensor (e.g. `fluxion_target_precompile_headers(app data checkpoint)`).
function(fluxion_target_precompile_headers target)
  set(headers <fluxion/fluxion.hpp>)
  foreach(facade IN LISTS ARGN)
    if(NOT facade MATCHES "^(data|checkpoint|tensorboard|io|xtensor)$")
      message(FATAL_ERROR "fluxion_target_precompile_headers(${target} ...): unknown facade '${facade}' "
                          "(expected data, checkpoint, tensorboard, io or xtensor)")
    endif()
    list(APPEND headers <fluxion/${facade}.hpp>)
  endforeach()
  target_precompile_headers(${target} PRIVATE ${headers})
  fluxion_precompiled_header_warnings(${target})
endfunction()

# fluxion_precompiled_header_warnings(target): fluxion turns xsimd's false -Wmaybe-uninitialized
# and -Wuninitialized warnings off around its includes (GCC bug 105593), but g++ 12 does not keep
# that pragma in a precompiled header: a target that uses one would get them (hundreds of lines)
# wherever an AVX-512 kernel is inlined (-Wuninitialized from _mm512_shuffle_f32x4 in xsimd's haddp,
# at -O1: 648 lines in two of fluxion's tests). Also used by fluxion's own tests (cmake/tests.cmake).
function(fluxion_precompiled_header_warnings target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized -Wno-uninitialized)
  endif()
endfunction()
