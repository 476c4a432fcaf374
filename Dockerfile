# Training image: `docker run IMAGE train` runs the entrypoint supervisor (PID 1), which
# launches one `trainer train` per GPU with the SageMaker/torchrun environment.
#
#   docker build -t mrcnn-training .
#   docker build -t mrcnn-training --build-arg WITH_EFA=0 --build-arg TORCH_CUDA_ARCH_LIST=9.0 .
#
# Everything comes from Debian's archive and PyPI: debian:bookworm-slim, Debian's compiler and
# -dev packages (the set scripts/setup.sh installs), LibTorch from the torch wheel, the CUDA
# compiler from NVIDIA's wheels (build stage only). At run time the CUDA libraries are the
# ones the torch wheel depends on (nvidia-* wheels); the driver comes from the host through
# the NVIDIA container runtime (CUDA 13.0: driver R580 or newer).
#
# Build arguments:
#   TORCH_CUDA_ARCH_LIST  GPU code compiled into our kernels (default below: T4, A100, A10G,
#                         L4/L40S, H100/H200, B200 + PTX for newer GPUs); fewer builds faster.
#                         CUDA 13 has no Volta (sm_70, ml.p3) or older target at all.
#   WITH_EFA              1 (default): AWS's EFA software and its NCCL plugin (aws-ofi-nccl)
#                         for multi-node training on EFA instances; 0 leaves them out.
#   BUILD_JOBS            parallel compile jobs (default: all cores).
#
#   CCACHE_DIR, PIP_CACHE_DIR  where the compile's ccache and the downloaded wheels live
#                         (default: the cache mounts /root/.cache/ccache, /root/.cache/pip)
#
# Fast rebuilds: the compile runs under ccache and the wheels are kept between builds, in
# cache mounts (`RUN --mount=type=cache`: BuildKit's or buildah's own cache). podman/buildah
# can use the host's caches instead: mount them at other paths and point the two arguments
# there (a -v mount at the cache mount's own path does not reliably win over it in buildah
# 1.28):
#   podman build -v $HOME/.cache/ccache:/var/cache/host-ccache --build-arg CCACHE_DIR=/var/cache/host-ccache \
#                -v $HOME/.cache/pip:/var/cache/host-pip --build-arg PIP_CACHE_DIR=/var/cache/host-pip ...
# The compile commands are made identical to scripts/setup.sh's host build (same Debian
# g++, source root with build/ and .venv/ inside, same CMake flags, same ccache settings),
# so the image's compile hits what a host build put in that cache and vice versa (measured:
# 139 of 139 compiles after a host build). The build prints its own ccache numbers
# ("mrcnn-build:" lines); scripts/test-containers.sh builds and runs this image with podman.

# ---- shared stages: keep them identical in Dockerfile and Dockerfile.serving, so one
# ---- image build reuses the other's layers (test/containers/test_dockerfiles.py checks).

# ---- torch: the torch wheel (LibTorch and the CUDA runtime wheels) in a venv ----
FROM debian:bookworm-slim AS torch
ENV LANG=C.UTF-8 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-venv ca-certificates >/dev/null \
 && rm -rf /var/lib/apt/lists/*
# The source root: build/ and .venv/ inside it, as in a host checkout after scripts/setup.sh,
# so paths relative to it (what ccache hashes under CCACHE_BASEDIR) are the same.
WORKDIR /opt/mrcnn/src
# Pinned like scripts/requirements.txt. pip's HTTP cache is not used: a proxy that strips the
# caching headers (as on our development machine) makes pip cache nothing, so the wheels are
# downloaded into a folder of the pip cache mount (a second build only re-reads the index)
# and installed from there.
ARG TORCH_VERSION=2.11.0
ARG PIP_CACHE_DIR=/root/.cache/pip
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv .venv \
 && .venv/bin/pip download -q -d "$PIP_CACHE_DIR/mrcnn-wheelhouse" torch==${TORCH_VERSION} \
 && .venv/bin/pip install -q --no-index --find-links "$PIP_CACHE_DIR/mrcnn-wheelhouse" torch==${TORCH_VERSION}

# ---- toolchain: compilers, headers, the CUDA compiler; nothing of our sources, so
# ---- `scripts/test-containers.sh --prepare` builds it while the host build compiles ----
FROM torch AS toolchain
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential ninja-build ccache cmake pkg-config \
      libboost-dev libcli11-dev nlohmann-json3-dev libfmt-dev libyaml-cpp-dev \
      libopencv-core-dev libopencv-imgproc-dev libpng-dev libjpeg-dev zlib1g-dev \
      protobuf-compiler libprotobuf-dev >/dev/null \
 && rm -rf /var/lib/apt/lists/*
# A CUDA toolkit at /usr/local/cuda-13.0 (/usr/local/cuda), laid out like NVIDIA's. Only the
# compiler wheels are added, at the versions torch's own pin names (cuda-toolkit 13.0.2's
# extras): nvcc (nvcc, ptxas, fatbinary, nvlink), nvvm (cicc, libdevice), crt (nvcc's
# headers), cccl (Thrust/CUB/libcu++). Headers and libraries of cudart, cuBLAS, cuFFT,
# cuRAND, cuSOLVER, cuSPARSE, NVRTC, NVTX, CUPTI, cuDNN and NCCL, which Torch's CMake config
# and our kernels need, are already in the venv (the torch wheel's dependencies hold them):
# they are linked in, not downloaded twice. The unversioned .so links are what CMake's
# FindCUDAToolkit looks for (the wheels ship only the sonames). The venv's versions constrain
# the resolution: nvcc's wheel asks for nvidia-cuda-runtime unpinned, and a newer cudart's
# cuda.h than nvcc's version fails Torch's CMake check.
ARG CUDA_TOOLKIT_VERSION=13.0.2
ARG PIP_CACHE_DIR=/root/.cache/pip
RUN --mount=type=cache,target=/root/.cache/pip \
    spec="cuda-toolkit[nvcc,nvvm,crt,cccl]==${CUDA_TOOLKIT_VERSION}" \
 && .venv/bin/pip freeze --all > /tmp/venv-pins.txt \
 && .venv/bin/pip download -q -c /tmp/venv-pins.txt -d "$PIP_CACHE_DIR/mrcnn-wheelhouse" "$spec" \
 && .venv/bin/pip install -q -c /tmp/venv-pins.txt --no-index --find-links "$PIP_CACHE_DIR/mrcnn-wheelhouse" \
      --no-compile --target /tmp/cuda-wheels "$spec" \
 && mv /tmp/cuda-wheels/nvidia/cu13 /usr/local/cuda-13.0 \
 && rm -rf /tmp/cuda-wheels /tmp/venv-pins.txt \
 && nvidia=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia \
 && cp -rsn "$nvidia"/cu13/. "$nvidia"/cudnn/. "$nvidia"/nccl/. /usr/local/cuda-13.0/ \
 && cd /usr/local/cuda-13.0 \
 && ln -s lib lib64 \
 && mkdir -p targets/x86_64-linux \
 && ln -s ../../include targets/x86_64-linux/include \
 && ln -s ../../lib targets/x86_64-linux/lib \
 && for so in lib/lib*.so.[0-9]*; do \
      link=${so%%.so.*}.so; [ -e "$link" ] || ln -s "$(basename "$so")" "$link"; \
    done \
 && ln -s cuda-13.0 /usr/local/cuda \
 && /usr/local/cuda/bin/nvcc --version | tail -n 2
# OpenSSL's headers for tracking/ (MLflow over HTTP(S), SigV4 signing for SageMaker's managed
# MLflow). A layer of its own after the CUDA compiler's: it joined later, and here it leaves
# the two layers above (and their cache on a machine that built them) as they were.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libssl-dev >/dev/null \
 && rm -rf /var/lib/apt/lists/*

# ---- build: compiles entrypoint, trainer, server ----
FROM toolchain AS build
COPY CMakeLists.txt ./
COPY cmake/ cmake/
COPY common/ common/
COPY entrypoint/ entrypoint/
COPY tracking/ tracking/
COPY download/ download/
COPY kernels/ kernels/
COPY trainer/ trainer/
COPY serving/ serving/
# GPU code for T4 (7.5), A100 (8.0), A10G (8.6), L4/L40S (8.9), H100/H200 (9.0), B200 (10.0),
# and PTX of 10.0 that newer GPUs' drivers compile. Torch's CMake config turns this into
# nvcc's -gencode flags (it ignores CMAKE_CUDA_ARCHITECTURES).
ARG TORCH_CUDA_ARCH_LIST="7.5;8.0;8.6;8.9;9.0;10.0+PTX"
ARG BUILD_JOBS=
ARG CCACHE_DIR=/root/.cache/ccache
# The ccache settings of scripts/setup.sh; compiler_check=content because the compilers'
# mtimes differ between the image and the host (pip writes nvcc fresh). The stats log
# counts this build's compiles only, whatever else the mounted cache has seen. Of the build
# tree only the binaries and the kernel library are kept: the rest (precompiled headers,
# objects, static libraries: ~2 GB) would only make the layer slow to commit; ccache is
# what makes the next compile fast.
RUN --mount=type=cache,target=/root/.cache/ccache \
    export CCACHE_DIR="$CCACHE_DIR" CCACHE_BASEDIR=/opt/mrcnn/src CCACHE_NOHASHDIR=1 \
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime \
      CCACHE_COMPILERCHECK=content CCACHE_STATSLOG=/tmp/ccache-stats.log \
 && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$(.venv/bin/python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" \
      -DPython3_EXECUTABLE=/opt/mrcnn/src/.venv/bin/python \
      -DMRCNN_CUDA=ON -DMRCNN_WITH_TESTS=OFF >/tmp/configure.log \
 || { cat /tmp/configure.log; exit 1; } \
 && cmake --build build -j"${BUILD_JOBS:-$(nproc)}" --target entrypoint trainer mrcnn_server \
 && if ! ldd build/bin/trainer | grep -q 'libssl\.so'; then \
      echo "the trainer was built without MLflow tracking (tracking/ needs OpenSSL):"; \
      grep -i 'tracking\|openssl' /tmp/configure.log; exit 1; \
    fi \
 && echo "mrcnn-build: ccache for this build (TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST):" \
 && ccache --show-log-stats | sed -e '/storage:$/d' -e 's/^/mrcnn-build:   /' \
 && rm -f /tmp/ccache-stats.log \
 && find build -mindepth 1 -maxdepth 1 ! -name bin ! -name lib -exec rm -rf {} + \
 && find build/lib -mindepth 1 ! -name libmrcnn_kernels.so -exec rm -rf {} + \
 && ls -l build/bin build/lib

# ---- end of the shared stages ----

# ---- training image: the binaries, the venv (torch importable for sagemaker_program
# ---- scripts), the run-time libraries of Debian's -dev packages; no compiler ----
# On top of the torch stage rather than a COPY of its venv: the 5 GB torch layer is then
# stored once for the torch stage, the build stage and this image, and a build does not
# write it again (a COPY of it needed about three times its size free while committing).
# Its run-time packages are a stage of their own (training-runtime): nothing of our sources,
# so `scripts/test-containers.sh --prepare` builds it while the host build compiles.
FROM torch AS training-runtime
ENV PYTHONUNBUFFERED=1
# The trainer's MLflow client also needs libssl3 and ca-certificates: the torch stage has both
# (python3's own dependency and its install line).
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libopencv-core406 libopencv-imgproc406 libpng16-16 libjpeg62-turbo zlib1g \
      libfmt9 libyaml-cpp0.7 libprotobuf-lite32 >/dev/null \
 && rm -rf /var/lib/apt/lists/*

# AWS's EFA software for multi-node training on EFA instances (ml.p4d, ml.p5, ...), as AWS
# documents it for containers ("Install the EFA software in a container", EC2 user guide;
# "Run training with EFA", SageMaker developer guide): the EFA installer with --skip-kmod
# --skip-limit-conf --no-verify. Since installer 1.2x it also installs the aws-ofi-nccl
# plugin (1.51.0: plugin 1.22.0, tested against NCCL 2.31 and compatible back to 2.17). The
# NCCL is the torch wheel's own (2.28), so it matches PyTorch's as SageMaker's guide asks.
# Their library folders go into the loader's path so that this NCCL finds the plugin
# (libnccl-net*.so) when it starts. (AWS's first step, `apt-get upgrade`, is left out: the
# base's packages come from the archive at build time.)
# NOT VERIFIED: efa-installer.amazonaws.com is not reachable from the machine this was
# written on, so this branch has never run; every local build used WITH_EFA=0 (which was
# built and run). Nothing here was tried on an EFA instance either.
ARG WITH_EFA=1
ARG EFA_INSTALLER_VERSION=1.51.0
RUN case "$WITH_EFA" in \
      0) echo "EFA software left out (WITH_EFA=0)" ;; \
      1) apt-get update -qq \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl >/dev/null \
         && mkdir /tmp/efa && cd /tmp/efa \
         && curl -fsSLO "https://efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \
         && tar -xf "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \
         && cd aws-efa-installer \
         && ./efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify \
         && plugin=$(find /opt/amazon -name 'libnccl-net*.so' | head -n 1) \
         && fabric=$(find /opt/amazon/efa -name 'libfabric.so*' | head -n 1) \
         && test -n "$plugin" -a -n "$fabric" \
         && printf '%s\n' "$(dirname "$fabric")" "$(dirname "$plugin")" > /etc/ld.so.conf.d/000-aws-efa.conf \
         && ldconfig \
         && cd / && rm -rf /tmp/efa /var/lib/apt/lists/* ;; \
      *) echo "WITH_EFA must be 1 or 0, not '$WITH_EFA'" >&2; exit 1 ;; \
    esac

FROM training-runtime
WORKDIR /opt/mrcnn/src
# Same paths as in the build stage: the binaries' RUNPATHs point into build/lib and the venv.
COPY --from=build /opt/mrcnn/src/build/bin/entrypoint /opt/mrcnn/src/build/bin/trainer build/bin/
COPY --from=build /opt/mrcnn/src/build/lib/libmrcnn_kernels.so build/lib/
# The trainer finds these at <exe>/../../configs, and through MRCNN_CONFIG_DIR.
COPY configs/ configs/
# The binaries need libcudart and libnccl themselves (not only through libtorch_cuda, whose
# RPATH finds them): the wheels' folders go on the loader's path. The build fails here if
# any library of the binaries is missing.
ENV PATH=/opt/mrcnn/src/.venv/bin:$PATH \
    LD_LIBRARY_PATH=/opt/mrcnn/src/build/lib:/opt/mrcnn/src/.venv/lib/python3.11/site-packages/nvidia/cu13/lib:/opt/mrcnn/src/.venv/lib/python3.11/site-packages/nvidia/nccl/lib \
    MRCNN_CONFIG_DIR=/opt/mrcnn/src/configs \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=13.0"
RUN ln -s /opt/mrcnn/src/build/bin/entrypoint /usr/local/bin/entrypoint \
 && ln -s /opt/mrcnn/src/build/bin/trainer /usr/local/bin/trainer \
 && ! ldd build/bin/entrypoint build/bin/trainer build/lib/libmrcnn_kernels.so | grep 'not found' \
 && python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'

WORKDIR /opt/ml
# Exec form: the supervisor is PID 1 and receives SageMaker's SIGTERM itself.
ENTRYPOINT ["entrypoint"]
