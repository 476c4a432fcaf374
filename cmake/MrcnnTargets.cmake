# Helpers every part uses for its targets.

# Our own warning policy; third-party headers are included as SYSTEM by their
# imported targets, so -Werror only bites on our code.
function(mrcnn_warnings target)
  if(MSVC)
    return()
  endif()
  set(flags -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-unused-parameter)
  if(MRCNN_WERROR)
    list(APPEND flags -Werror)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${flags}>)
  if(MRCNN_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
endfunction()

# Precompiled Torch headers for Torch-heavy targets: each Torch TU otherwise spends
# most of its compile time parsing the same ~200k lines. CXX sources only.
function(mrcnn_torch_pch target)
  target_precompile_headers(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:<torch/torch.h$<ANGLE-R>>")
endfunction()

# Catch2 v2 test executable registered with CTest. Usage:
#   mrcnn_add_test(NAME test_x SOURCES a.cpp b.cpp LIBS lib1 lib2 [START_FIRST "[tag]"])
# START_FIRST: the test cases with that Catch2 tag get a high CTest COST, so CTest starts them
# before the rest when the build tree has no timings of its own (a clean clone's, as in CI):
# without it CTest starts tests in declaration order, and a minute-long one declared late
# runs alone at the end (the sanitizer trees' large-body test, issue 42).
function(mrcnn_add_test)
  cmake_parse_arguments(T "" "NAME;START_FIRST" "SOURCES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${T_NAME} PRIVATE Catch2::Catch2 mrcnn_catch_main ${T_LIBS})
  mrcnn_warnings(${T_NAME})
  if(T_START_FIRST)
    catch_discover_tests(${T_NAME} TEST_SPEC "${T_START_FIRST}" TEST_PREFIX "${T_NAME}:"
      PROPERTIES TIMEOUT 600 COST 1000)
    catch_discover_tests(${T_NAME} TEST_SPEC "~${T_START_FIRST}" TEST_PREFIX "${T_NAME}:"
      PROPERTIES TIMEOUT 600)
  else()
    catch_discover_tests(${T_NAME} TEST_PREFIX "${T_NAME}:" PROPERTIES TIMEOUT 600)
  endif()
endfunction()

# libFuzzer target (MRCNN_FUZZ builds) and its bounded CTest run `NAME`, label "fuzz", for
# MRCNN_FUZZ_SECONDS. The run starts from the seeds in SEEDS (read-only; crashes found
# become seeds there) and keeps what it finds in a build-tree corpus. Usage:
#   mrcnn_add_fuzzer(NAME fuzz_x SOURCES a.cpp LIBS lib1 SEEDS dir [MAX_LEN bytes])
function(mrcnn_add_fuzzer)
  cmake_parse_arguments(F "" "NAME;SEEDS;MAX_LEN" "SOURCES;LIBS" ${ARGN})
  if(NOT F_MAX_LEN)
    set(F_MAX_LEN 65536)
  endif()
  add_executable(${F_NAME} ${F_SOURCES})
  set_target_properties(${F_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  target_link_libraries(${F_NAME} PRIVATE ${F_LIBS})
  target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
  mrcnn_warnings(${F_NAME})
  set(corpus ${CMAKE_BINARY_DIR}/fuzz/corpus/${F_NAME})
  set(artifacts ${CMAKE_BINARY_DIR}/fuzz/artifacts/)
  add_test(NAME ${F_NAME}
    COMMAND sh -c "mkdir -p '${corpus}' '${artifacts}' && exec \"$0\" -seed=${MRCNN_FUZZ_SEED} -max_total_time=${MRCNN_FUZZ_SECONDS} -max_len=${F_MAX_LEN} -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix='${artifacts}${F_NAME}-' '${corpus}' '${F_SEEDS}'"
      $<TARGET_FILE:${F_NAME}>)
  math(EXPR timeout "${MRCNN_FUZZ_SECONDS} + 120")
  # COST: started before the short tests (see mrcnn_add_test's START_FIRST), not as the tail.
  set_tests_properties(${F_NAME} PROPERTIES TIMEOUT ${timeout} LABELS fuzz COST ${MRCNN_FUZZ_SECONDS})
endfunction()
