cmake_policy(VERSION 3.25)
# Installs the build tree into WORK_DIR/prefix, then configures, builds and runs
# the consumer project against it, with find_package and with pkg-config.
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/consumer"
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer configure failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/consumer" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer build failed: ${rc}")
endif()
execute_process(COMMAND "${WORK_DIR}/consumer/consumer" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc OR NOT out MATCHES "shape=\\(2, 2\\), dtype=float32")
  message(FATAL_ERROR "consumer run failed (${rc}): ${out}")
endif()
# pkg-config: compile and link the same program by hand.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${WORK_DIR}/prefix/lib/pkgconfig")
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs strata OUTPUT_VARIABLE flags
                RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(rc)
  message(FATAL_ERROR "pkg-config strata failed")
endif()
separate_arguments(flag_list UNIX_COMMAND "${flags}")
execute_process(COMMAND c++ "${CONSUMER_DIR}/main.cc" -o "${WORK_DIR}/consumer_pc" ${flag_list}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "pkg-config build failed: c++ main.cc ${flags}")
endif()
execute_process(COMMAND "${WORK_DIR}/consumer_pc" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "pkg-config consumer run failed")
endif()
message(STATUS "consumer built and ran with find_package and pkg-config")
