# Training image: `docker run IMAGE train` runs the entrypoint supervisor (PID 1), which
# launches one `trainer train` per GPU with the SageMaker/torchrun environment.
# Build: docker build -t mrcnn-training .
FROM nvidia/cuda:13.0.0-devel-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8

# The same package set as scripts/setup.sh (Ubuntu names); Catch2 is left out because the
# image is built without tests.
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      build-essential ninja-build ccache cmake pkg-config git \
      python3 python3-venv python3-dev \
      libboost-dev libcli11-dev nlohmann-json3-dev libfmt-dev libyaml-cpp-dev \
      libopencv-core-dev libopencv-imgproc-dev libpng-dev \
      protobuf-compiler libprotobuf-dev \
      libjpeg-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*

# LibTorch comes from the torch wheel (pinned like scripts/requirements.txt), installed
# into a virtual environment that the build finds through torch.utils.cmake_prefix_path.
ENV VIRTUAL_ENV=/opt/mrcnn/venv
RUN python3 -m venv $VIRTUAL_ENV \
 && $VIRTUAL_ENV/bin/pip install --no-cache-dir --upgrade pip \
 && $VIRTUAL_ENV/bin/pip install --no-cache-dir torch==2.11.0
ENV PATH=$VIRTUAL_ENV/bin:$PATH

WORKDIR /opt/mrcnn
COPY CMakeLists.txt ./
COPY cmake/ cmake/
COPY common/ common/
COPY entrypoint/ entrypoint/
COPY kernels/ kernels/
COPY trainer/ trainer/
COPY serving/ serving/
COPY configs/ configs/

# The binaries stay in build/bin so the trainer finds the configs at <exe>/../../configs
# and the entrypoint finds the trainer beside itself.
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMRCNN_WITH_TESTS=OFF -DMRCNN_CUDA=ON \
      -DCMAKE_PREFIX_PATH="$(python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" \
      -DPython3_EXECUTABLE=$VIRTUAL_ENV/bin/python \
 && cmake --build build --target entrypoint trainer \
 && ln -s /opt/mrcnn/build/bin/entrypoint /usr/local/bin/entrypoint \
 && ln -s /opt/mrcnn/build/bin/trainer /usr/local/bin/trainer \
 && rm -rf /root/.cache

ENV MRCNN_CONFIG_DIR=/opt/mrcnn/configs \
    LD_LIBRARY_PATH=/opt/mrcnn/build/lib

# Exec form: the supervisor is PID 1 and receives SageMaker's SIGTERM itself.
ENTRYPOINT ["entrypoint"]
