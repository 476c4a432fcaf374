#pragma once
// A small reader/writer for the safetensors format (8-byte little-endian header length,
// a JSON header mapping names to {dtype, shape, data_offsets}, then the raw bytes), plus
// strict loading into a torch::nn::Module by state_dict name. Every error names the
// file and, where there is one, the tensor key.
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <string>

namespace torch::nn {
class Module;
}

namespace mrcnn::model {

using TensorMap = std::map<std::string, at::Tensor>;

// Parses an in-memory safetensors image. Tensors are CPU, contiguous, owning their memory.
// Rejects what ParseSafetensorsHeader (safetensors_header.h) rejects: short input, a header
// length past the end, a header that is not a JSON object, entries without
// dtype/shape/data_offsets, unknown dtypes, shapes too large for a tensor, offsets outside
// the data area or disagreeing with dtype x shape, and overlapping tensors. `source` names
// the origin in messages.
TensorMap ParseSafetensors(const std::string& bytes, const std::string& source);
TensorMap ReadSafetensors(const std::filesystem::path& path);

// Serialises tensors (any device; copied to CPU contiguous) in key order, header padded
// to a multiple of 8 bytes. `metadata` becomes the optional "__metadata__" entry.
std::string SerializeSafetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata = {});
// Writes atomically: to `path`.tmp, then renames.
void WriteSafetensors(const std::filesystem::path& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Parameters and buffers of `module` by their dotted state_dict names (detached, shared
// storage).
TensorMap StateDict(const torch::nn::Module& module);
// Copies every tensor of `tensors` into the same-named parameter or buffer of `module`.
// Throws, naming `source` and the key, on a key the module lacks, a module tensor the map
// lacks, or a shape or dtype mismatch. Values are copied to the module tensor's device.
void LoadStateDict(torch::nn::Module& module, const TensorMap& tensors, const std::string& source);

}  // namespace mrcnn::model
