# Every C++ source and header of the project follows .clang-format
# (clang-format --dry-run -Werror). Run with -DSOURCE_DIR=<repo root>.
find_program(CLANG_FORMAT NAMES clang-format clang-format-14)
if(NOT CLANG_FORMAT)
  message(FATAL_ERROR "clang-format not found: install Debian's clang-format (scripts/packages.txt)")
endif()
file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR}
     ${SOURCE_DIR}/strata/*.h ${SOURCE_DIR}/strata/*.cc ${SOURCE_DIR}/tools/*.h ${SOURCE_DIR}/tools/*.cc
     ${SOURCE_DIR}/bench/*.cc ${SOURCE_DIR}/examples/*.h ${SOURCE_DIR}/examples/*.cc
     ${SOURCE_DIR}/tests/*.h ${SOURCE_DIR}/tests/*.cc)
set(unformatted "")
foreach(rel IN LISTS sources)
  execute_process(COMMAND ${CLANG_FORMAT} --dry-run -Werror ${rel}
                  WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    list(APPEND unformatted ${rel})
  endif()
endforeach()
if(unformatted)
  list(JOIN unformatted "\n  " text)
  message(FATAL_ERROR "Not formatted with .clang-format (run clang-format -i on them):\n  ${text}")
endif()
