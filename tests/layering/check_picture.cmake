cmake_policy(VERSION 3.25)
# The picture of docs/architecture.md is the layer targets' graph: the build
# writes it (strata_write_layer_table) and this compares it with the committed
# docs/architecture.dot, and checks that docs/architecture.svg was rendered
# from that graph (the same edges, read from the titles Graphviz gives them).
#   cmake -DGENERATED=<build>/strata_layers.dot -DDOCS=<repo>/docs -P check_picture.cmake
file(READ "${GENERATED}" generated)
file(READ "${DOCS}/architecture.dot" committed)
if(NOT generated STREQUAL committed)
  message(FATAL_ERROR
    "docs/architecture.dot differs from the layer targets' edges: copy ${GENERATED} to "
    "docs/architecture.dot, render it (dot -Tsvg docs/architecture.dot -o "
    "docs/architecture.svg) and update docs/architecture.md")
endif()

file(STRINGS "${DOCS}/architecture.dot" dot_lines REGEX "^  \"[a-z_]+\" -> \"[a-z_]+\"")
set(dot_edges "")
foreach(line IN LISTS dot_lines)
  string(REGEX MATCH "^  \"([a-z_]+)\" -> \"([a-z_]+)\"" _ "${line}")
  list(APPEND dot_edges "${CMAKE_MATCH_1}->${CMAKE_MATCH_2}")
endforeach()
file(STRINGS "${DOCS}/architecture.svg" svg_lines REGEX "<title>[a-z_]+&#45;&gt;[a-z_]+</title>")
set(svg_edges "")
foreach(line IN LISTS svg_lines)
  string(REGEX MATCH "<title>([a-z_]+)&#45;&gt;([a-z_]+)</title>" _ "${line}")
  list(APPEND svg_edges "${CMAKE_MATCH_1}->${CMAKE_MATCH_2}")
endforeach()
list(SORT dot_edges)
list(SORT svg_edges)
if(NOT dot_edges STREQUAL svg_edges)
  message(FATAL_ERROR
    "docs/architecture.svg was not rendered from docs/architecture.dot (edges differ); run "
    "dot -Tsvg docs/architecture.dot -o docs/architecture.svg")
endif()
list(LENGTH dot_edges n)
message(STATUS "architecture picture: docs/architecture.dot and .svg show the ${n} declared edges")
