# Build options. Everything defaults to "on if available" so a plain configure works
# on the development machine (CUDA compile only), in CI and on the GPU machine.

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# MRCNN_CUDA: AUTO (on when nvcc is found), ON (required), OFF (forced off).
set(MRCNN_CUDA AUTO CACHE STRING "Build CUDA kernels: AUTO, ON or OFF")
set_property(CACHE MRCNN_CUDA PROPERTY STRINGS AUTO ON OFF)
# Parts that need LibTorch / OpenCV can be left out (e.g. an entrypoint-only image).
option(MRCNN_WITH_TORCH "Build the Torch parts (kernels, trainer, serving)" ON)
option(MRCNN_WITH_TESTS "Build the tests" ON)
# MRCNN_TORCH_CPU_ONLY: link only LibTorch's CPU part (libtorch_cpu, libc10), never libtorch,
# libtorch_cuda, libc10_cuda or the CUDA runtime, although PyPI's torch wheel is a CUDA
# build: binaries for the CPU serving image (Dockerfile.serving, DEVICE=cpu), which ships
# none of the CUDA libraries. No CUDA kernels then (MRCNN_CUDA must not be ON).
option(MRCNN_TORCH_CPU_ONLY "Link LibTorch's CPU libraries only (no CUDA at run time)" OFF)
if(MRCNN_TORCH_CPU_ONLY AND MRCNN_CUDA STREQUAL "ON")
  message(FATAL_ERROR "MRCNN_TORCH_CPU_ONLY=ON builds no CUDA kernels: set MRCNN_CUDA to OFF or AUTO")
endif()
# MRCNN_LIBTORCH_DIR: a torch package folder (a wheel's torch/: lib/, include/). With
# MRCNN_TORCH_CPU_ONLY, its libtorch_cpu and libc10 are linked directly, without Torch's
# CMake config, which enables CUDA for the wheel's CUDA build and cannot run when
# cross-compiling: the arm64 CPU serving image (cmake/toolchain-aarch64-linux-gnu.cmake).
set(MRCNN_LIBTORCH_DIR "" CACHE PATH "torch package folder to link without Torch's CMake config (CPU-only builds)")
if(MRCNN_LIBTORCH_DIR AND NOT MRCNN_TORCH_CPU_ONLY)
  message(FATAL_ERROR "MRCNN_LIBTORCH_DIR links LibTorch's CPU part only: set MRCNN_TORCH_CPU_ONLY=ON too")
endif()
option(MRCNN_WERROR "Treat warnings as errors in our targets" ON)

# Sanitizer builds (scripts/test-sanitizers.sh, Torch-free): MRCNN_SANITIZE is what every
# target's -fsanitize= gets ("address,undefined" or "thread"); nothing recovers, so a report
# ends the process. MRCNN_FUZZ (clang) adds libFuzzer's coverage instrumentation to every
# target and builds the fuzz targets of test/fuzz, which then link the libraries as they are.
set(MRCNN_SANITIZE "" CACHE STRING "Sanitizers for every target, e.g. address,undefined or thread")
option(MRCNN_FUZZ "Build the libFuzzer targets (clang, with MRCNN_SANITIZE=address,undefined)" OFF)
if(MRCNN_SANITIZE)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${MRCNN_SANITIZE};-fno-sanitize-recover=all;-fno-omit-frame-pointer>")
  add_link_options("$<$<LINK_LANGUAGE:C,CXX>:-fsanitize=${MRCNN_SANITIZE}>")
endif()
if(MRCNN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MRCNN_FUZZ needs clang's -fsanitize=fuzzer: configure with "
                        "-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>")
endif()

find_program(MRCNN_CCACHE ccache)
if(MRCNN_CCACHE)
  set(CMAKE_C_COMPILER_LAUNCHER ${MRCNN_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${MRCNN_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${MRCNN_CCACHE})
endif()

set(MRCNN_CUDA_ENABLED OFF)
# nvcc, for the CUDA kernels, and for Torch's own CMake config in a CPU-only link (below).
if(MRCNN_WITH_TORCH AND NOT CMAKE_CUDA_COMPILER AND NOT MRCNN_LIBTORCH_DIR
   AND (MRCNN_TORCH_CPU_ONLY OR NOT MRCNN_CUDA STREQUAL "OFF"))
  find_program(MRCNN_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
  if(MRCNN_NVCC)
    set(CMAKE_CUDA_COMPILER ${MRCNN_NVCC})
  endif()
endif()
if(NOT MRCNN_CUDA STREQUAL "OFF" AND MRCNN_WITH_TORCH AND NOT MRCNN_TORCH_CPU_ONLY)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Hopper (H100/H200) is what the GPU machine has; Ampere for the A100 fleets.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    # nvcc takes `-isystem DIR` as well as CMake's `-isystem=DIR`, and ccache (4.7) rewrites
    # only the former relative to CCACHE_BASEDIR: with it, the CUDA compiles of two checkouts,
    # or of a checkout and an image build, share ccache entries.
    set(CMAKE_INCLUDE_SYSTEM_FLAG_CUDA "-isystem ")
    set(MRCNN_CUDA_ENABLED ON)
  elseif(MRCNN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MRCNN_CUDA=ON but no CUDA compiler was found (set CUDA_HOME or put nvcc on PATH)")
  endif()
elseif(MRCNN_TORCH_CPU_ONLY AND MRCNN_WITH_TORCH AND NOT MRCNN_LIBTORCH_DIR)
  # Torch's CMake config enables the CUDA language whenever the wheel is a CUDA build, even to
  # link only its CPU part (and stops without a CUDA toolkit): it gets the nvcc and the
  # architectures the CUDA build would use (in the image build nvcc is not on PATH, and
  # without an architecture CMake looks for a GPU's). Nothing is compiled with them.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
endif()
message(STATUS "mrcnn: CUDA kernels ${MRCNN_CUDA_ENABLED}, Torch parts ${MRCNN_WITH_TORCH}, "
               "LibTorch CPU part only ${MRCNN_TORCH_CPU_ONLY}")
