# Per-layer helpers: one library target per layer (strata::<layer>) whose link
# dependencies are exactly the edges ARCHITECTURE.md allows, and one GoogleTest
# binary per module.

set(STRATA_WARNINGS -Wall -Wextra -Werror -Wno-error=deprecated-declarations -Werror=switch
                    -Wshadow -Wnon-virtual-dtor)
# Under clang every build checks the STRATA_GUARDED_BY / STRATA_REQUIRES annotations
# (strata/base/mutex.h); the clang-tsa preset is such a build, and the ThreadSafety.*
# tests check a GCC build's units with the installed clang.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  list(APPEND STRATA_WARNINGS -Wthread-safety)
endif()

# strata_layer(<layer> SOURCES <files...> DEPS <strata layers...> LIBS <third-party targets...>
#              PRIVATE_LIBS <third-party targets...>)
function(strata_layer layer)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LIBS;PRIVATE_LIBS" ${ARGN})
  set(target strata_${layer})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(strata::${layer} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${layer} OUTPUT_NAME strata_${layer})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_options(${target} PRIVATE ${STRATA_WARNINGS})
  foreach(dep IN LISTS ARG_DEPS)
    target_link_libraries(${target} PUBLIC strata_${dep})
  endforeach()
  target_link_libraries(${target} PUBLIC ${ARG_LIBS} Threads::Threads)
  if(ARG_PRIVATE_LIBS)
    target_link_libraries(${target} PRIVATE ${ARG_PRIVATE_LIBS})
  endif()
  install(TARGETS ${target} EXPORT strataTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set_property(GLOBAL APPEND PROPERTY STRATA_LAYERS ${target})
endfunction()

# Test code is compiled for build speed, not run speed: the library it calls keeps the
# build type's optimisation, while the tests' own code (assertions, fixtures, small
# reference loops) takes -O1, which compiles a test unit in 60-70% of the time of -O3
# (gcc 12; e.g. train_cli_test.cc 12.5 s against 20.3 s of CPU). The last -O wins.
set(STRATA_TEST_COPTS -O1 CACHE STRING "Extra compile options of the test programs")

# strata_test(<name> SOURCES <files...> [DEPS <targets...>] [LABELS <labels...>] [TIMEOUT s]
#             [FILTER <gtest filter>])
# One GoogleTest binary per module; each TEST becomes a CTest test (discovered at test time).
function(strata_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT;FILTER" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT STRATA_BUILD_TESTS)
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${STRATA_WARNINGS} ${STRATA_TEST_COPTS})
  target_link_libraries(${name} PRIVATE strata::strata strata_testing GTest::gtest GTest::gmock GTest::gtest_main ${ARG_DEPS})
  set(props TIMEOUT ${ARG_TIMEOUT})
  if(ARG_LABELS)
    list(APPEND props LABELS "${ARG_LABELS}")
  endif()
  set(filter_args)
  if(ARG_FILTER)
    set(filter_args TEST_FILTER "${ARG_FILTER}")
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60 ${filter_args}
                       PROPERTIES ${props} WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
endfunction()
