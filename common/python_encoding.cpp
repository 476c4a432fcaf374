#include "common/python_encoding.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string_view>

namespace mrcnn::common {
namespace {

// float.__repr__: the shortest digits that round-trip, in fixed notation when
// the decimal exponent is in [-4, 16), else d.ddde±XX.
std::string PythonFloatRepr(double v, bool json) {
  if (std::isnan(v))
    return json ? "NaN" : "nan";
  if (std::isinf(v))
    return v > 0 ? (json ? "Infinity" : "inf") : (json ? "-Infinity" : "-inf");
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (sci.front() == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const auto e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.')
      digits.push_back(c);
  }
  int exponent = 0;
  std::string_view exp_text = sci.substr(e_pos + 1);
  if (exp_text.front() == '+')
    exp_text.remove_prefix(1);
  std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exponent);

  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else {
      const auto int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, int_len);
        out.push_back('.');
        out += digits.substr(int_len);
      }
    }
    return out;
  }
  out.push_back(digits[0]);
  if (digits.size() > 1) {
    out.push_back('.');
    out += digits.substr(1);
  }
  out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

// Decodes one UTF-8 sequence at s[i] (nlohmann only stores valid UTF-8), advancing i.
char32_t NextCodePoint(const std::string& s, size_t& i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  int extra = 0;
  char32_t cp = lead;
  if (lead >= 0xF0) {
    extra = 3;
    cp = lead & 0x07;
  } else if (lead >= 0xE0) {
    extra = 2;
    cp = lead & 0x0F;
  } else if (lead >= 0xC0) {
    extra = 1;
    cp = lead & 0x1F;
  }
  ++i;
  for (int k = 0; k < extra && i < s.size(); ++k, ++i) {
    cp = (cp << 6) | (static_cast<unsigned char>(s[i]) & 0x3F);
  }
  return cp;
}

void AppendJsonString(const std::string& s, std::string& out) {
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = NextCodePoint(s, i);
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (cp >= 0x20 && cp <= 0x7E) {
      out.push_back(static_cast<char>(cp));
    } else if (cp > 0xFFFF) {
      const char32_t v = cp - 0x10000;
      out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    } else {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
    }
  }
  out.push_back('"');
}

// repr(str): single quotes unless the text has a single quote and no double one.
void AppendPythonStringRepr(const std::string& s, std::string& out) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out.push_back(quote);
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t cp = NextCodePoint(s, i);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) {
      // Python escapes non-printable code points; for Latin-1 that is C0, DEL, C1,
      // NBSP and the soft hyphen.
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(cp));
    } else {
      out.append(s, start, i - start);
    }
  }
  out.push_back(quote);
}

void AppendJson(const nlohmann::json& v, std::string& out) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      out += "null";
      break;
    case nlohmann::json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      break;
    case nlohmann::json::value_t::number_integer:
      out += std::to_string(v.get<int64_t>());
      break;
    case nlohmann::json::value_t::number_unsigned:
      out += std::to_string(v.get<uint64_t>());
      break;
    case nlohmann::json::value_t::number_float:
      out += PythonFloatRepr(v.get<double>(), true);
      break;
    case nlohmann::json::value_t::string:
      AppendJsonString(v.get_ref<const std::string&>(), out);
      break;
    case nlohmann::json::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& item : v) {
        if (!first)
          out.push_back(',');
        first = false;
        AppendJson(item, out);
      }
      out.push_back(']');
      break;
    }
    case nlohmann::json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.items()) {  // std::map order = sort_keys for UTF-8
        if (!first)
          out.push_back(',');
        first = false;
        AppendJsonString(key, out);
        out.push_back(':');
        AppendJson(item, out);
      }
      out.push_back('}');
      break;
    }
    case nlohmann::json::value_t::binary:
    case nlohmann::json::value_t::discarded:
      out += "null";
      break;
  }
}

void AppendPythonRepr(const nlohmann::json& v, std::string& out, bool top_level) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      out += "None";
      break;
    case nlohmann::json::value_t::boolean:
      out += v.get<bool>() ? "True" : "False";
      break;
    case nlohmann::json::value_t::number_integer:
      out += std::to_string(v.get<int64_t>());
      break;
    case nlohmann::json::value_t::number_unsigned:
      out += std::to_string(v.get<uint64_t>());
      break;
    case nlohmann::json::value_t::number_float:
      out += PythonFloatRepr(v.get<double>(), false);
      break;
    case nlohmann::json::value_t::string:
      if (top_level) {
        out += v.get_ref<const std::string&>();
      } else {
        AppendPythonStringRepr(v.get_ref<const std::string&>(), out);
      }
      break;
    case nlohmann::json::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& item : v) {
        if (!first)
          out += ", ";
        first = false;
        AppendPythonRepr(item, out, false);
      }
      out.push_back(']');
      break;
    }
    case nlohmann::json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first)
          out += ", ";
        first = false;
        AppendPythonStringRepr(key, out);
        out += ": ";
        AppendPythonRepr(item, out, false);
      }
      out.push_back('}');
      break;
    }
    case nlohmann::json::value_t::binary:
    case nlohmann::json::value_t::discarded:
      out += "None";
      break;
  }
}

}  // namespace

std::string PythonJsonDumps(const nlohmann::json& value) {
  std::string out;
  AppendJson(value, out);
  return out;
}

std::string PythonStr(const nlohmann::json& value) {
  std::string out;
  AppendPythonRepr(value, out, true);
  return out;
}

std::string PythonEnvValue(const nlohmann::json& value) {
  if (value.is_null())
    return "";
  if (value.is_string())
    return value.get<std::string>();
  return PythonJsonDumps(value);
}

}  // namespace mrcnn::common
