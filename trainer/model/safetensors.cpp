#include "trainer/model/safetensors.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <vector>

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

[[noreturn]] void Malformed(const std::string& source, const std::string& why) {
  throw std::runtime_error(source + ": malformed safetensors file: " + why);
}

}  // namespace

TensorMap ParseSafetensors(const std::string& bytes, const std::string& source) {
  if (bytes.size() < 8) Malformed(source, "shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  if (header_len > bytes.size() - 8) {
    Malformed(source, "header length " + std::to_string(header_len) + " exceeds the file size " +
                          std::to_string(bytes.size()) + " (truncated file?)");
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_len));
  } catch (const nlohmann::json::exception& e) {
    Malformed(source, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object()) Malformed(source, "header is not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - header_len;
  const char* data = bytes.data() + 8 + header_len;

  TensorMap out;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") continue;
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      Malformed(source, "entry '" + key + "' needs dtype, shape and data_offsets");
    }
    if (!entry["dtype"].is_string() || !entry["shape"].is_array() || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2) {
      Malformed(source, "entry '" + key + "' has a wrongly typed dtype, shape or data_offsets");
    }
    const at::ScalarType type = DtypeFromName(entry["dtype"].get<std::string>(), source, key);
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const auto& dim : entry["shape"]) {
      if (!dim.is_number_unsigned()) Malformed(source, "entry '" + key + "' has a negative or non-integer dimension");
      shape.push_back(dim.get<int64_t>());
      numel *= dim.get<uint64_t>();
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      Malformed(source, "entry '" + key + "' has non-integer data_offsets");
    }
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      Malformed(source, "entry '" + key + "' has data_offsets [" + std::to_string(begin) + ", " +
                            std::to_string(end) + "] outside the data area of " + std::to_string(data_size) +
                            " bytes (truncated file?)");
    }
    const uint64_t expected = numel * c10::elementSize(type);
    if (end - begin != expected) {
      Malformed(source, "entry '" + key + "' spans " + std::to_string(end - begin) + " bytes but dtype x shape needs " +
                            std::to_string(expected));
    }
    ranges.emplace_back(begin, end);
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
    if (expected > 0) std::memcpy(t.data_ptr(), data + begin, expected);
    out.emplace(key, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) Malformed(source, "two tensors overlap in the data area");
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
