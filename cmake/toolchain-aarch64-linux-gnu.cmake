# Cross-compiling for arm64 (aarch64) Linux on an x86-64 Debian with Debian's cross
# toolchain (g++-aarch64-linux-gnu) and arm64 -dev packages installed side by side
# (`dpkg --add-architecture arm64`): Dockerfile.serving's build-arm64 stage. LibTorch comes
# from the aarch64 torch wheel through MRCNN_LIBTORCH_DIR (cmake/MrcnnOptions.cmake), not
# from Torch's CMake config.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Debian's multiarch layout: arm64 libraries in /usr/lib/aarch64-linux-gnu, headers shared
# in /usr/include (plus /usr/include/aarch64-linux-gnu), so the root stays /. CMake's
# library architecture (found from the compiler) makes find_library look in the arm64
# folders; pkg-config is pointed at them too.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
# Programs (protoc, python3) are the build machine's; libraries and headers the target's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
