#include "trainer/model/safetensors.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <vector>

#include "trainer/model/safetensors_header.h"

namespace mrcnn::model {
namespace {

struct DtypeInfo {
  const char* name;
  at::ScalarType type;
};

constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
    {"U8", at::kByte},    {"BOOL", at::kBool},
};

at::ScalarType DtypeFromName(const std::string& name, const std::string& source, const std::string& key) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  throw std::runtime_error(source + ": tensor '" + key + "' has unknown dtype '" + name +
                           "' (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
}

const char* NameFromDtype(at::ScalarType type, const std::string& key) {
  for (const auto& d : kDtypes) {
    if (type == d.type) return d.name;
  }
  throw std::runtime_error("safetensors: tensor '" + key + "' has dtype " + std::string(c10::toString(type)) +
                           " which the format cannot store");
}

}  // namespace

TensorMap ParseSafetensors(const std::string& bytes, const std::string& source) {
  const SafetensorsHeader header = ParseSafetensorsHeader(bytes, source);
  const char* data = bytes.data() + header.data_offset;
  TensorMap out;
  for (const auto& entry : header.entries) {
    at::Tensor t = at::empty(
        entry.shape, at::TensorOptions().dtype(DtypeFromName(entry.dtype, source, entry.key)));
    if (entry.end > entry.begin)
      std::memcpy(t.data_ptr(), data + entry.begin, entry.end - entry.begin);
    out.emplace(entry.key, std::move(t));
  }
  return out;
}

TensorMap ReadSafetensors(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open weights file");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseSafetensors(bytes, path.string());
}

std::string SerializeSafetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> cpu;
  uint64_t offset = 0;
  for (const auto& [key, tensor] : tensors) {
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t size = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[key] = {{"dtype", NameFromDtype(t.scalar_type(), key)},
                   {"shape", t.sizes().vec()},
                   {"data_offsets", {offset, offset + size}}};
    offset += size;
    cpu.push_back(std::move(t));
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t len = json.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xff);
  out += json;
  out.reserve(out.size() + offset);
  for (const auto& t : cpu) {
    out.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()) * t.element_size());
  }
  return out;
}

void WriteSafetensors(const std::filesystem::path& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string bytes = SerializeSafetensors(tensors, metadata);
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(tmp.string() + ": cannot open for writing");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error(tmp.string() + ": write failed (disk full?)");
  }
  std::filesystem::rename(tmp, path);
}

TensorMap StateDict(const torch::nn::Module& module) {
  TensorMap out;
  for (const auto& item : module.named_parameters(true)) out[item.key()] = item.value().detach();
  for (const auto& item : module.named_buffers(true)) out[item.key()] = item.value().detach();
  return out;
}

void LoadStateDict(torch::nn::Module& module, const TensorMap& tensors, const std::string& source) {
  TensorMap targets = StateDict(module);
  for (const auto& [key, value] : tensors) {
    auto it = targets.find(key);
    if (it == targets.end()) {
      throw std::runtime_error(source + ": tensor '" + key +
                               "' is not a parameter or buffer of the configured model (wrong config.yaml "
                               "backbone/heads, or a checkpoint of another architecture)");
    }
    if (it->second.sizes() != value.sizes()) {
      std::ostringstream msg;
      msg << source << ": tensor '" << key << "' has shape " << value.sizes() << " but the model expects "
          << it->second.sizes();
      if (key.find("box_predictor") != std::string::npos || key.find("mask_fcn_logits") != std::string::npos) {
        msg << " (does MODEL.ROI_HEADS.NUM_CLASSES in config.yaml match the checkpoint?)";
      }
      throw std::runtime_error(msg.str());
    }
    if (it->second.scalar_type() != value.scalar_type()) {
      throw std::runtime_error(source + ": tensor '" + key + "' has dtype " + c10::toString(value.scalar_type()) +
                               " but the model expects " + c10::toString(it->second.scalar_type()));
    }
  }
  for (const auto& [key, target] : targets) {
    if (tensors.find(key) == tensors.end()) {
      throw std::runtime_error(source + ": tensor '" + key + "' that the model needs is missing");
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& [key, target] : targets) target.copy_(tensors.at(key));
}

}  // namespace mrcnn::model
