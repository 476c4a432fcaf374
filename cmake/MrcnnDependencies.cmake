# Dependency lookup. System libraries come from Debian packages (scripts/setup.sh);
# LibTorch from the torch wheel in .venv (CMAKE_PREFIX_PATH = torch.utils.cmake_prefix_path).

find_package(nlohmann_json 3 REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
if(MRCNN_WITH_TESTS)
  find_package(Catch2 2 REQUIRED)
  list(APPEND CMAKE_MODULE_PATH ${Catch2_DIR})
  include(Catch)
endif()

# The Torch-free libraries (yaml-cpp for the engine's config; OpenCV core/imgproc, libjpeg,
# libpng, zlib and Boost for image decoding and the server) are required with Torch; without
# it (-DMRCNN_WITH_TORCH=OFF: an entrypoint-only build, or the sanitizer builds of
# scripts/test-sanitizers.sh) each part that needs them is built when they are found.
if(MRCNN_WITH_TORCH)
  set(MRCNN_FIND_PACKAGE REQUIRED)
  set(MRCNN_FIND_FILE REQUIRED)
else()
  set(MRCNN_FIND_PACKAGE QUIET)
  set(MRCNN_FIND_FILE "")
endif()
find_package(yaml-cpp ${MRCNN_FIND_PACKAGE})
# Debian's per-module OpenCV -dev packages carry no CMake config (only the heavy
# libopencv-dev does), so find the two modules we use directly. Image files are read and
# written with libjpeg and libpng (trainer/data/strict_image_codec.h, image_encode.h), not
# OpenCV's imgcodecs: Debian builds that one against GDAL, Mesa and LLVM, over a hundred
# libraries that the images and the GPU check would have to carry.
find_path(MRCNN_OPENCV_INCLUDE opencv2/core.hpp PATH_SUFFIXES opencv4 ${MRCNN_FIND_FILE})
foreach(module core imgproc)
  find_library(MRCNN_OPENCV_${module} NAMES opencv_${module} ${MRCNN_FIND_FILE})
endforeach()
if(MRCNN_OPENCV_INCLUDE AND MRCNN_OPENCV_core AND MRCNN_OPENCV_imgproc)
  add_library(mrcnn_opencv INTERFACE)
  target_include_directories(mrcnn_opencv SYSTEM INTERFACE ${MRCNN_OPENCV_INCLUDE})
  target_link_libraries(mrcnn_opencv INTERFACE ${MRCNN_OPENCV_core} ${MRCNN_OPENCV_imgproc})
  add_library(mrcnn::opencv ALIAS mrcnn_opencv)
endif()
# OpenCV's own codecs serve only as the tests' independent reference (and to make damaged
# test images); the tests that need them are built when they are found.
find_library(MRCNN_OPENCV_imgcodecs opencv_imgcodecs)
if(MRCNN_OPENCV_imgcodecs AND TARGET mrcnn_opencv)
  add_library(mrcnn_opencv_imgcodecs INTERFACE)
  target_link_libraries(mrcnn_opencv_imgcodecs INTERFACE mrcnn_opencv ${MRCNN_OPENCV_imgcodecs})
  add_library(mrcnn::opencv_imgcodecs ALIAS mrcnn_opencv_imgcodecs)
endif()
find_package(JPEG ${MRCNN_FIND_PACKAGE})
find_package(PNG ${MRCNN_FIND_PACKAGE})
find_package(ZLIB ${MRCNN_FIND_PACKAGE})
find_package(Boost 1.74 ${MRCNN_FIND_PACKAGE})
# tracking/ (MLflow, AWS SigV4); optional everywhere: the GPU check's carried packages lack it.
find_package(OpenSSL QUIET COMPONENTS Crypto SSL)

if(MRCNN_WITH_TORCH)
  # TorchConfig looks for CUDA itself when the wheel is CUDA-enabled; keep it quiet
  # about the (compile-only) toolkit when we build without CUDA.
  if(NOT MRCNN_CUDA_ENABLED)
    set(CAFFE2_USE_CUDNN OFF)
  endif()
  # Only the architectures we compile for (see MrcnnOptions); Torch's default list
  # spans sm_50..sm_120 and multiplies CUDA compile time.
  if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
  endif()
  if(MRCNN_LIBTORCH_DIR)
    # What Torch's config gives torch_cpu and c10 (Caffe2Targets.cmake, torch 2.11), from
    # the package folder itself (MrcnnOptions.cmake says why).
    set(TORCH_INCLUDE_DIRS ${MRCNN_LIBTORCH_DIR}/include ${MRCNN_LIBTORCH_DIR}/include/torch/csrc/api/include)
    foreach(lib torch_cpu c10)
      if(NOT EXISTS ${MRCNN_LIBTORCH_DIR}/lib/lib${lib}.so)
        message(FATAL_ERROR "MRCNN_LIBTORCH_DIR=${MRCNN_LIBTORCH_DIR} has no lib/lib${lib}.so: "
                            "point it at a torch package folder (a wheel's torch/)")
      endif()
      add_library(${lib} SHARED IMPORTED)
      set_target_properties(${lib} PROPERTIES IMPORTED_LOCATION ${MRCNN_LIBTORCH_DIR}/lib/lib${lib}.so)
    endforeach()
    set_target_properties(torch_cpu PROPERTIES INTERFACE_COMPILE_DEFINITIONS
                          "USE_DISTRIBUTED;USE_C10D_GLOO;USE_RPC;USE_TENSORPIPE")
    add_library(mrcnn_torch_cpu INTERFACE)
    target_include_directories(mrcnn_torch_cpu SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
    target_compile_definitions(mrcnn_torch_cpu INTERFACE FMT_HEADER_ONLY)
    # libtorch_cpu's own dependencies (Arm Compute Library, NVPL) sit beside it: the linker
    # resolves them there. At run time the binaries' RUNPATH (CMake's, naming lib/) finds
    # them: the image keeps the folder at the path it had in the build.
    target_link_libraries(mrcnn_torch_cpu INTERFACE torch_cpu c10 "-Wl,-rpath-link,${MRCNN_LIBTORCH_DIR}/lib")
    # The wheel's libtorch_cpu imports 26 CUDA runtime and CUPTI functions for its profiler's
    # CUDA tracing, from libraries that are not here (nor in the image: the copy there has
    # those entries removed, scripts/containers/elf_drop_needed.py). An executable's link
    # checks its shared libraries' undefined symbols by default; these are never called.
    target_link_options(mrcnn_torch_cpu INTERFACE "LINKER:--allow-shlib-undefined")
    set(TORCH_LIBRARIES mrcnn_torch_cpu)
  else()
    find_package(Torch REQUIRED)
    # The wheel's include dir ships fmt 12 headers, which shadow Debian's fmt 9 in every
    # translation unit that sees Torch's includes; such a TU then needs fmt 12 symbols that
    # no library provides. Header-only mode makes those TUs self-contained.
    set_property(TARGET torch APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY)
    if(MRCNN_TORCH_CPU_ONLY)
      # Torch's `torch` target is libtorch.so, which needs libtorch_cuda.so, and TORCH_LIBRARIES
      # adds libc10_cuda, cudart and NVRTC: link the two CPU libraries instead, with the same
      # headers (SYSTEM, as for the imported targets: -Werror must not reach them).
      add_library(mrcnn_torch_cpu INTERFACE)
      target_include_directories(mrcnn_torch_cpu SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
      target_compile_definitions(mrcnn_torch_cpu INTERFACE FMT_HEADER_ONLY)
      target_link_libraries(mrcnn_torch_cpu INTERFACE torch_cpu c10)
      set(TORCH_LIBRARIES mrcnn_torch_cpu)
    endif()
  endif()
  find_package(Python3 COMPONENTS Interpreter)
endif()
