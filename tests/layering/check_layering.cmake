cmake_policy(VERSION 3.25)
# Checks every `#include "strata/..."` line (indented ones too) of every source
# and header under strata/, tools/, bench/, examples/ and tests/ against the
# layer table the build generates from the strata_layer declarations
# (cmake/StrataHelpers.cmake), so the edges have one source: the DEPS of each
# layer's CMakeLists.txt.
#   cmake -DSOURCE_DIR=<tree> -DLAYER_TABLE=<build>/strata_layers.cmake
#         [-DREQUIRE_USED_EDGES=ON] -P check_layering.cmake
# Rules:
#   - A layer's files include only its own headers and those of the layers it
#     declares as direct DEPS (not what those reach in turn); through an
#     API_DEPS edge only the headers the used layer lists as its API.
#   - Nobody includes another layer's internal/ headers, except the unit tests
#     of a layer that declares TESTS_USE_INTERNALS_OF that layer.
#   - strata/testing (and any testing/ folder) only in tests: *_test.cc files,
#     tests/, testing/ folders and bench/ (benchmarks of the harnesses' inputs).
#   - A layer's unit tests (*_test.cc, its testing/ folders) include its own
#     headers, the layers of its edges (behind an API_DEPS edge any header: a
#     test may build a concrete strategy) and the layers it declares as
#     TEST_DEPS.
#   - The bundle header strata/strata.h only outside the layers.
#   - The programs (tools/, bench/, examples/, tests/) may use every layer's
#     public headers: they link strata::strata.
#   - With REQUIRE_USED_EDGES, every declared edge is used by some non-test
#     file, so the declared graph (and its picture) is the real one.
include("${LAYER_TABLE}")
get_filename_component(SOURCE_DIR "${SOURCE_DIR}" ABSOLUTE)

# The owning layer of a path under strata/ (longest folder prefix), or "".
function(owner_of rel out)
  set(best "")
  set(best_len 0)
  foreach(layer IN LISTS STRATA_LAYER_NAMES)
    set(folder "${STRATA_LAYER_FOLDER_${layer}}/")
    string(LENGTH "${folder}" len)
    string(FIND "${rel}" "${folder}" pos)
    if(pos EQUAL 0 AND len GREATER best_len)
      set(best "${layer}")
      set(best_len ${len})
    endif()
  endforeach()
  set(${out} "${best}" PARENT_SCOPE)
endfunction()

set(files "")
foreach(root strata tools bench examples tests)
  file(GLOB_RECURSE found "${SOURCE_DIR}/${root}/*.h" "${SOURCE_DIR}/${root}/*.cc")
  list(APPEND files ${found})
endforeach()
list(SORT files)

set(violations "")
foreach(layer IN LISTS STRATA_LAYER_NAMES)
  set(used_${layer} "")
endforeach()
foreach(f IN LISTS files)
  file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
  # The planted violations the check must reject are not part of the tree.
  if(rel MATCHES "^tests/layering/fixtures/")
    continue()
  endif()
  set(owner "")
  if(rel MATCHES "^strata/")
    owner_of("${rel}" owner)
  endif()
  set(is_test FALSE)
  if(rel MATCHES "_test\\.cc$" OR rel MATCHES "(^|/)testing/" OR rel MATCHES "^tests/")
    set(is_test TRUE)
  endif()
  set(may_use_testing ${is_test})
  if(rel MATCHES "^bench/")
    set(may_use_testing TRUE)
  endif()
  file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]strata/")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "[\"<](strata/[^\">]+)[\">]" _ "${line}")
    set(inc "${CMAKE_MATCH_1}")
    string(STRIP "${line}" shown)
    set(where "${rel}: '${shown}'")
    if(inc MATCHES "(^|/)testing/")
      if(NOT may_use_testing)
        list(APPEND violations "${where}: test harnesses (testing/) are for tests only")
      endif()
      continue()
    endif()
    if(inc MATCHES "^strata/[^/]+$")
      if(owner)
        list(APPEND violations "${where}: layer '${owner}' may not include the bundle header")
      endif()
      continue()
    endif()
    owner_of("${inc}" target)
    if(NOT target)
      list(APPEND violations "${where}: no layer owns this header")
      continue()
    endif()
    set(whitebox FALSE)
    if(owner AND is_test AND target IN_LIST STRATA_LAYER_TEST_INTERNALS_${owner})
      set(whitebox TRUE)
    endif()
    if(inc MATCHES "/internal/" AND NOT target STREQUAL owner AND NOT whitebox)
      if(owner)
        set(who "layer '${owner}'")
      else()
        set(who "'${rel}'")
      endif()
      list(APPEND violations "${where}: ${who} may not include the internal/ headers of layer '${target}'")
      continue()
    endif()
    if(NOT owner OR target STREQUAL owner)
      continue()
    endif()
    if(is_test)
      set(edges ${STRATA_LAYER_DEPS_${owner}} ${STRATA_LAYER_API_DEPS_${owner}}
                ${STRATA_LAYER_TEST_DEPS_${owner}})
      if(NOT target IN_LIST edges)
        list(JOIN edges " " edges)
        list(APPEND violations
             "${where}: the tests of layer '${owner}' may not include layer '${target}' (its edges and test edges: ${edges})")
      endif()
      continue()
    endif()
    if(target IN_LIST STRATA_LAYER_DEPS_${owner})
      list(APPEND used_${owner} ${target})
    elseif(target IN_LIST STRATA_LAYER_API_DEPS_${owner})
      list(APPEND used_${owner} ${target})
      string(LENGTH "${STRATA_LAYER_FOLDER_${target}}/" prefix)
      string(SUBSTRING "${inc}" ${prefix} -1 header)
      if(NOT header IN_LIST STRATA_LAYER_API_${target})
        list(JOIN STRATA_LAYER_API_${target} ", " api)
        list(APPEND violations
             "${where}: layer '${owner}' may use only the abstract API of layer '${target}' (${api})")
      endif()
    else()
      set(edges ${STRATA_LAYER_DEPS_${owner}} ${STRATA_LAYER_API_DEPS_${owner}})
      list(JOIN edges " " edges)
      list(APPEND violations
           "${where}: layer '${owner}' may not include layer '${target}' (its direct edges: ${edges})")
    endif()
  endforeach()
endforeach()

if(REQUIRE_USED_EDGES)
  foreach(layer IN LISTS STRATA_LAYER_NAMES)
    foreach(dep IN LISTS STRATA_LAYER_DEPS_${layer} STRATA_LAYER_API_DEPS_${layer})
      if(NOT dep IN_LIST used_${layer})
        list(APPEND violations
             "${STRATA_LAYER_FOLDER_${layer}}/CMakeLists.txt: layer '${layer}' declares an edge to '${dep}' that none of its files uses")
      endif()
    endforeach()
  endforeach()
endif()

if(violations)
  # One unwrapped line each (FATAL_ERROR would wrap them), then the failure.
  foreach(v IN LISTS violations)
    message("layering violation: ${v}")
  endforeach()
  list(LENGTH violations n)
  message(FATAL_ERROR "${n} layering violation(s), listed above")
endif()
list(LENGTH files count)
message(STATUS "layering: the includes of ${count} files follow the declared edges")
