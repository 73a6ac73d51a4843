# Runs one consumer test (see cmake/tests.cmake): configures, builds and runs a project that uses
# fluxion the way a user would.
#   MODE=find_package      installs FLUXION_BUILD_DIR into WORK_DIR/prefix, then builds
#                          tests/consumer/find_package against that prefix only
#   MODE=add_subdirectory  builds tests/consumer/add_subdirectory, which adds FLUXION_SOURCE_DIR
# Other inputs: WORK_DIR (wiped first), GENERATOR, CXX_COMPILER, LAUNCHER, CONFIG (fluxion's build's,
# for the install) and CONSUMER_CONFIG (the consumer project's build type; CONFIG by default).
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "consumer.${MODE}: `${command}` failed (${result}):\n${output}")
  endif()
  message(STATUS "${output}")
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(build_dir "${WORK_DIR}/build")
if(NOT CONFIG)
  set(CONFIG Release)
endif()
if(NOT CONSUMER_CONFIG)
  set(CONSUMER_CONFIG "${CONFIG}")
endif()
set(configure_args -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
                   "-DCMAKE_BUILD_TYPE=${CONSUMER_CONFIG}")
if(LAUNCHER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()

if(MODE STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  run("${CMAKE_COMMAND}" --install "${FLUXION_BUILD_DIR}" --prefix "${prefix}" --config "${CONFIG}")
  # Only the fresh prefix may satisfy find_package(fluxion); its dependencies come from the system.
  run("${CMAKE_COMMAND}" -S "${FLUXION_SOURCE_DIR}/tests/consumer/find_package" -B "${build_dir}"
      ${configure_args} "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
      "-DFLUXION_EXPECTED_PREFIX=${prefix}")
elseif(MODE STREQUAL "add_subdirectory")
  run("${CMAKE_COMMAND}" -S "${FLUXION_SOURCE_DIR}/tests/consumer/add_subdirectory" -B "${build_dir}"
      ${configure_args} "-DFLUXION_SOURCE_DIR=${FLUXION_SOURCE_DIR}")
else()
  message(FATAL_ERROR "run_consumer.cmake: unknown MODE `${MODE}`")
endif()

run("${CMAKE_COMMAND}" --build "${build_dir}" --config "${CONSUMER_CONFIG}")
foreach(program IN ITEMS consumer consumer_levers consumer_model_levers)
  find_program(${program}_path ${program} PATHS "${build_dir}" "${build_dir}/${CONSUMER_CONFIG}" NO_DEFAULT_PATH NO_CACHE)
  if(NOT ${program}_path)
    message(FATAL_ERROR "consumer.${MODE}: the ${program} executable was not built")
  endif()
  run("${${program}_path}")
endforeach()
