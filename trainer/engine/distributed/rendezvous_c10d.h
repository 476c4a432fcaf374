#pragma once
// The c10d::Store under a store Rendezvous returned, for c10d's process groups
// (nccl_process_group.h). A separate header: rendezvous.h stays Torch-free.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "trainer/engine/distributed/kv_store.h"

namespace mrcnn::engine::dist {

// Throws std::invalid_argument when `store` is not one Rendezvous returned.
c10::intrusive_ptr<c10d::Store> C10dStoreOf(KeyValueStore& store);

}  // namespace mrcnn::engine::dist
