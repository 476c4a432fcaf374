#include "trainer/engine/distributed/nccl_allreduce.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace mrcnn::engine::dist {
namespace {

void Check(ncclResult_t rc, const char* what, ncclComm_t comm = nullptr) {
  if (rc == ncclSuccess)
    return;
  std::string detail = ncclGetErrorString(rc);
  if (comm != nullptr) {
    if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0')
      detail += std::string(": ") + last;
  }
  throw std::runtime_error(std::string("NCCL ") + what + " failed: " + detail +
                           " (rerun with NCCL_DEBUG=INFO for NCCL's view)");
}

}  // namespace

std::unique_ptr<NcclCommunicator> NcclCommunicator::Create(KeyValueStore* store, int rank,
                                                           int world_size, int device,
                                                           std::chrono::milliseconds timeout) {
  if (const cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
    throw std::runtime_error("cudaSetDevice(" + std::to_string(device) +
                             ") failed: " + cudaGetErrorString(err));
  }
  ncclUniqueId id{};
  const std::string key = "mrcnn/nccl/unique_id";
  if (rank == 0) {
    Check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    store->Set(key, std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
  } else {
    const std::string bytes = store->Get(key, timeout);
    if (bytes.size() != sizeof(id))
      throw std::runtime_error("store key " + key + " does not hold an ncclUniqueId");
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(&id));
  }
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator());
  ncclComm_t comm = nullptr;
  Check(ncclCommInitRank(&comm, world_size, id, rank), "ncclCommInitRank");
  c->comm_ = comm;
  return c;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr)
    ncclCommDestroy(static_cast<ncclComm_t>(comm_));
}

void NcclCommunicator::AllReduceSum(float* device_data, size_t count, void* cuda_stream) {
  auto comm = static_cast<ncclComm_t>(comm_);
  Check(ncclAllReduce(device_data, device_data, count, ncclFloat32, ncclSum, comm,
                      static_cast<cudaStream_t>(cuda_stream)),
        "ncclAllReduce", comm);
}

}  // namespace mrcnn::engine::dist
