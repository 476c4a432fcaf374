#include "trainer/data/mask_rle.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace mrcnn::data {
namespace {

void CheckSize(int64_t height, int64_t width, const char* what) {
  // Sides first: the product of two large sides overflows int64 (found by fuzzing).
  if (height < 0 || width < 0 || (height > 0 && width > int64_t{UINT32_MAX} / height)) {
    throw std::invalid_argument(std::string(what) + ": mask size " + std::to_string(height) + "x" +
                                std::to_string(width) + " is negative or exceeds 2^32 pixels");
  }
}

// Walks two run sequences in lockstep; calls step(length, a_on, b_on) for every segment
// where neither changes. This is the common core of merge and intersection counting.
template <typename Step>
void WalkRunPair(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, Step step) {
  size_t ia = 1, ib = 1;
  uint32_t left_a = a.empty() ? 0 : a[0];
  uint32_t left_b = b.empty() ? 0 : b[0];
  bool on_a = false, on_b = false;
  bool more = true;
  while (more) {
    // A sequence that ran out before the other (a malformed RLE whose counts do not add up
    // to height x width) continues as background: pycocotools loops forever here.
    if (left_a == 0 && ia >= a.size())
      left_a = left_b;
    if (left_b == 0 && ib >= b.size())
      left_b = left_a;
    uint32_t len = std::min(left_a, left_b);
    left_a -= len;
    left_b -= len;
    // Advance past exhausted runs (including zero-length ones) before reporting, so a
    // caller sees the state of the *next* segment through the flags it gets next time.
    bool was_a = on_a, was_b = on_b;
    if (left_a == 0) {
      on_a = ia < a.size() && !on_a;
      if (ia < a.size())
        left_a = a[ia++];
    }
    if (left_b == 0) {
      on_b = ib < b.size() && !on_b;
      if (ib < b.size())
        left_b = b[ib++];
    }
    more = left_a + static_cast<uint64_t>(left_b) > 0;
    step(len, was_a, was_b, on_a, on_b, !more);
  }
}

}  // namespace

Rle EncodeMask(const uint8_t* mask, int64_t height, int64_t width) {
  CheckSize(height, width, "EncodeMask");
  return EncodeMaskRegion(mask, MaskRegion{0, 0, width, height}, height, width);
}

Rle RleFromChanges(const int32_t* changes, int64_t count, int64_t height, int64_t width) {
  CheckSize(height, width, "RleFromChanges");
  const int64_t pixels = height * width;
  Rle rle{height, width, {}};
  rle.counts.reserve(static_cast<size_t>(count) + 1);
  int64_t before = 0;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t at = changes[k];
    // Index 0 may only open the list (a mask whose first pixel is set: an empty zero run).
    if (at < before || (at == before && k > 0) || at >= pixels) {
      throw std::invalid_argument("RleFromChanges: change " + std::to_string(k) + " is at " +
                                  std::to_string(at) + ", after " + std::to_string(before) +
                                  " in a " + std::to_string(width) + "x" + std::to_string(height) +
                                  " mask: the changes must increase and lie within it");
    }
    rle.counts.push_back(static_cast<uint32_t>(at - before));
    before = at;
  }
  rle.counts.push_back(static_cast<uint32_t>(pixels - before));
  return rle;
}

Rle EncodeMaskRegion(const uint8_t* region_mask, const MaskRegion& region, int64_t image_height,
                     int64_t image_width) {
  CheckSize(image_height, image_width, "EncodeMaskRegion");
  if (region.x < 0 || region.y < 0 || region.width < 0 || region.height < 0 ||
      region.x > image_width - region.width || region.y > image_height - region.height) {
    throw std::invalid_argument("EncodeMaskRegion: region " + std::to_string(region.width) + "x" +
                                std::to_string(region.height) + " at (" + std::to_string(region.x) +
                                ", " + std::to_string(region.y) + ") does not lie within the " +
                                std::to_string(image_width) + "x" + std::to_string(image_height) +
                                " image");
  }
  const int64_t height = image_height;
  const int64_t stride = region.width;
  Rle rle{image_height, image_width, {}};
  // The RLE runs column-major over a row-major buffer, a strided scan of every pixel. A
  // detection's mask is mostly zeros outside its box, so one fast row-major pass first
  // finds the rows and columns holding any nonzero pixel, and only that rectangle is
  // scanned; everything else extends the current zero run. Bounds are in image pixels.
  int64_t y0 = image_height, y1 = -1, x0 = image_width, x1 = -1;
  for (int64_t ry = 0; ry < region.height; ++ry) {
    const uint8_t* row = region_mask + ry * stride;
    int64_t first = 0;
    for (; first + 8 <= region.width; first += 8) {
      uint64_t word;
      std::memcpy(&word, row + first, 8);
      if (word != 0)
        break;
    }
    while (first < region.width && row[first] == 0)
      ++first;
    if (first == region.width)
      continue;
    int64_t last = region.width - 1;
    while (last > first && row[last] == 0)
      --last;
    y0 = std::min(y0, region.y + ry);
    y1 = region.y + ry;
    x0 = std::min(x0, region.x + first);
    x1 = std::max(x1, region.x + last);
  }
  uint8_t current = 0;
  uint64_t run = 0;
  auto extend = [&](uint8_t value, uint64_t length) {
    if (length == 0)  // no empty runs in the middle, as pycocotools
      return;
    if (value != current) {
      rle.counts.push_back(static_cast<uint32_t>(run));
      run = 0;
      current = value;
    }
    run += length;
  };
  if (y1 < 0) {  // all zeros
    rle.counts.push_back(static_cast<uint32_t>(image_height * image_width));
    return rle;
  }
  extend(0, static_cast<uint64_t>(x0 * height));
  for (int64_t x = x0; x <= x1; ++x) {
    extend(0, static_cast<uint64_t>(y0));
    const uint8_t* column = region_mask + (x - region.x);
    for (int64_t y = y0; y <= y1; ++y)
      extend(column[(y - region.y) * stride] != 0, 1);
    extend(0, static_cast<uint64_t>(height - 1 - y1));
  }
  extend(0, static_cast<uint64_t>((image_width - 1 - x1) * height));
  rle.counts.push_back(static_cast<uint32_t>(run));
  return rle;
}

std::vector<uint8_t> DecodeMask(const Rle& rle) {
  CheckSize(rle.height, rle.width, "DecodeMask");
  const uint64_t total = static_cast<uint64_t>(rle.height) * static_cast<uint64_t>(rle.width);
  std::vector<uint8_t> out(total, 0);
  uint64_t pos = 0;
  uint8_t value = 0;
  for (uint32_t run : rle.counts) {
    if (pos + run > total) {
      throw std::invalid_argument("DecodeMask: RLE counts sum past " + std::to_string(total) +
                                  " pixels (" + std::to_string(rle.height) + "x" +
                                  std::to_string(rle.width) + ")");
    }
    if (value) {
      for (uint64_t p = pos; p < pos + run; ++p) {
        // Column-major position p -> row-major (y, x).
        uint64_t x = p / static_cast<uint64_t>(rle.height);
        uint64_t y = p % static_cast<uint64_t>(rle.height);
        out[y * static_cast<uint64_t>(rle.width) + x] = 1;
      }
    }
    pos += run;
    value ^= 1;
  }
  if (pos != total) {
    throw std::invalid_argument("DecodeMask: RLE counts sum to " + std::to_string(pos) +
                                ", expected " + std::to_string(total) + " pixels");
  }
  return out;
}

std::string RleCountsToString(const Rle& rle) {
  std::string s;
  s.reserve(rle.counts.size() * 2);
  for (size_t i = 0; i < rle.counts.size(); ++i) {
    int64_t x = rle.counts[i];
    if (i > 2)
      x -= static_cast<int64_t>(rle.counts[i - 2]);
    // Signed little-endian groups of 5 bits; bit 0x20 says another group follows.
    bool more = true;
    while (more) {
      char c = static_cast<char>(x & 0x1f);
      x >>= 5;  // arithmetic shift keeps the sign
      more = (c & 0x10) ? x != -1 : x != 0;
      if (more)
        c |= 0x20;
      s.push_back(static_cast<char>(c + 48));
    }
  }
  return s;
}

Rle RleFromString(const std::string& counts, int64_t height, int64_t width) {
  CheckSize(height, width, "RleFromString");
  Rle rle{height, width, {}};
  rle.counts.reserve(counts.size());
  size_t p = 0;
  while (p < counts.size()) {
    int64_t x = 0;
    int shift = 0;
    bool more = true;
    while (more) {
      if (p >= counts.size()) {
        throw std::invalid_argument("RLE counts string ends inside a value: \"" + counts + "\"");
      }
      int c = static_cast<unsigned char>(counts[p]) - 48;
      if (c < 0 || c > 63) {
        throw std::invalid_argument("RLE counts string has a character outside '0'..'o' at " +
                                    std::to_string(p));
      }
      if (shift > 60)
        throw std::invalid_argument("RLE counts string has an overlong value");
      x |= static_cast<int64_t>(c & 0x1f) << shift;
      more = (c & 0x20) != 0;
      ++p;
      shift += 5;
      if (!more && (c & 0x10))
        x |= -(int64_t{1} << shift);  // sign-extend
    }
    size_t m = rle.counts.size();
    if (m > 2)
      x += static_cast<int64_t>(rle.counts[m - 2]);
    // pycocotools stores the value truncated to 32 bits; do the same.
    rle.counts.push_back(static_cast<uint32_t>(x));
  }
  return rle;
}

Rle RleFromUncompressed(const std::vector<uint32_t>& counts, int64_t height, int64_t width) {
  CheckSize(height, width, "RleFromUncompressed");
  return Rle{height, width, counts};
}

void CheckPolygonReach(const std::vector<double>& xy) {
  constexpr double kReach = 1 << 26;
  for (size_t i = 0; i < xy.size(); ++i) {
    if (!(std::fabs(xy[i]) <= kReach)) {
      throw std::invalid_argument("polygon " + std::string(i % 2 == 0 ? "x" : "y") +
                                  " coordinate " + std::to_string(xy[i]) +
                                  " is not a number within +-2^26 pixels");
    }
  }
}

Rle RleFromPolygon(const std::vector<double>& xy, int64_t height, int64_t width) {
  CheckSize(height, width, "RleFromPolygon");
  if (height == 0 || width == 0)
    return Rle{height, width, {0}};  // what the walk below gives, whatever the polygon
  CheckPolygonReach(xy);
  const size_t k = xy.size() / 2;
  const double scale = 5;
  // Vertices on a 5x finer integer grid, closed.
  std::vector<int> vx(k + 1), vy(k + 1);
  for (size_t j = 0; j < k; ++j) {
    vx[j] = static_cast<int>(scale * xy[2 * j] + .5);
    vy[j] = static_cast<int>(scale * xy[2 * j + 1] + .5);
  }
  if (k > 0) {
    vx[k] = vx[0];
    vy[k] = vy[0];
  }
  // Dense boundary points along every edge (Bresenham-like on the fine grid).
  std::vector<int> u, v;
  size_t dense = 0;
  for (size_t j = 0; j < k; ++j) {
    dense +=
        static_cast<size_t>(std::max(std::abs(vx[j] - vx[j + 1]), std::abs(vy[j] - vy[j + 1]))) + 1;
  }
  u.reserve(dense);
  v.reserve(dense);
  for (size_t j = 0; j < k; ++j) {
    int xs = vx[j], xe = vx[j + 1], ys = vy[j], ye = vy[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
      std::swap(xs, xe);
      std::swap(ys, ye);
    }
    if (dx >= dy) {
      const double s = dx == 0 ? 0.0 : static_cast<double>(ye - ys) / dx;
      for (int d = 0; d <= dx; ++d) {
        const int t = flip ? dx - d : d;
        u.push_back(t + xs);
        v.push_back(static_cast<int>(ys + s * t + .5));
      }
    } else {
      const double s = static_cast<double>(xe - xs) / dy;
      for (int d = 0; d <= dy; ++d) {
        const int t = flip ? dy - d : d;
        v.push_back(t + ys);
        u.push_back(static_cast<int>(xs + s * t + .5));
      }
    }
  }
  // Where the boundary crosses a pixel-centre column, record the first pixel below it.
  std::vector<uint32_t> starts;
  const double h = static_cast<double>(height);
  for (size_t j = 1; j < u.size(); ++j) {
    if (u[j] == u[j - 1])
      continue;
    double xd = static_cast<double>(u[j] < u[j - 1] ? u[j] : u[j] - 1);
    xd = (xd + .5) / scale - .5;
    if (std::floor(xd) != xd || xd < 0 || xd > static_cast<double>(width - 1))
      continue;
    double yd = static_cast<double>(v[j] < v[j - 1] ? v[j] : v[j - 1]);
    yd = (yd + .5) / scale - .5;
    if (yd < 0) {
      yd = 0;
    } else if (yd > h) {
      yd = h;
    }
    yd = std::ceil(yd);
    starts.push_back(static_cast<uint32_t>(static_cast<int>(xd) * static_cast<int>(height) +
                                           static_cast<int>(yd)));
  }
  starts.push_back(static_cast<uint32_t>(height * width));
  std::sort(starts.begin(), starts.end());
  // Boundary positions -> run lengths; zero-length runs fold into their neighbour.
  uint32_t prev = 0;
  for (uint32_t& a : starts) {
    uint32_t t = a;
    a -= prev;
    prev = t;
  }
  Rle rle{height, width, {}};
  size_t j = 0;
  rle.counts.push_back(starts[j++]);
  while (j < starts.size()) {
    if (starts[j] > 0) {
      rle.counts.push_back(starts[j++]);
    } else {
      ++j;
      if (j < starts.size())
        rle.counts.back() += starts[j++];
    }
  }
  return rle;
}

Rle RleFromBox(const std::array<double, 4>& xywh, int64_t height, int64_t width) {
  // Sides outside the image cover no more pixel centres than the image's border does, so a
  // box is clamped to it (RleFromPolygon refuses far-away vertices); NaN stays NaN.
  const auto clamp = [](double v, int64_t side) {
    return std::isnan(v) ? v : std::clamp(v, -1.0, static_cast<double>(side) + 1);
  };
  const double xs = clamp(xywh[0], width), xe = clamp(xywh[0] + xywh[2], width);
  const double ys = clamp(xywh[1], height), ye = clamp(xywh[1] + xywh[3], height);
  return RleFromPolygon({xs, ys, xs, ye, xe, ye, xe, ys}, height, width);
}

Rle RleFromPolygons(const std::vector<std::vector<double>>& polygons, int64_t height,
                    int64_t width) {
  std::vector<Rle> parts;
  parts.reserve(polygons.size());
  for (const auto& poly : polygons) {
    if (poly.size() == 4) {
      parts.push_back(RleFromBox({poly[0], poly[1], poly[2], poly[3]}, height, width));
    } else {
      parts.push_back(RleFromPolygon(poly, height, width));
    }
  }
  return MergeRles(parts, false);
}

Rle MergeRles(const std::vector<Rle>& rles, bool intersect) {
  if (rles.empty())
    return Rle{};
  if (rles.size() == 1)
    return rles[0];
  Rle acc = rles[0];
  for (size_t i = 1; i < rles.size(); ++i) {
    const Rle& b = rles[i];
    if (b.height != acc.height || b.width != acc.width)
      return Rle{};
    std::vector<uint32_t> merged;
    merged.reserve(acc.counts.size() + b.counts.size());
    bool value = false;
    uint32_t run = 0;
    WalkRunPair(acc.counts, b.counts,
                [&](uint32_t len, bool, bool, bool on_a, bool on_b, bool last) {
                  run += len;
                  const bool previous = value;
                  value = intersect ? (on_a && on_b) : (on_a || on_b);
                  if (value != previous || last) {
                    merged.push_back(run);
                    run = 0;
                  }
                });
    acc.counts = std::move(merged);
  }
  return acc;
}

uint64_t RleArea(const Rle& rle) {
  uint64_t area = 0;
  for (size_t i = 1; i < rle.counts.size(); i += 2)
    area += rle.counts[i];
  return area;
}

std::array<double, 4> RleToBbox(const Rle& rle) {
  const size_t m = rle.counts.size() / 2 * 2;
  if (m == 0)
    return {0, 0, 0, 0};
  // A 0-pixel image with counts (uncompressed counts are taken as given, as pycocotools
  // does): pycocotools divides by the height below and dies of SIGFPE; its box is empty.
  if (rle.height == 0 || rle.width == 0)
    return {0, 0, 0, 0};
  const uint32_t h = static_cast<uint32_t>(rle.height), w = static_cast<uint32_t>(rle.width);
  uint32_t xs = w, ys = h, xe = 0, ye = 0, cc = 0, xp = 0;
  for (size_t j = 0; j < m; ++j) {
    cc += rle.counts[j];
    const uint32_t t = cc - static_cast<uint32_t>(j % 2);
    const uint32_t y = t % h, x = (t - y) / h;
    if (j % 2 == 0) {
      xp = x;
    } else if (xp < x) {
      // A foreground run spanning columns covers every row.
      ys = 0;
      ye = h - 1;
    }
    xs = std::min(xs, x);
    xe = std::max(xe, x);
    ys = std::min(ys, y);
    ye = std::max(ye, y);
  }
  return {static_cast<double>(xs), static_cast<double>(ys), static_cast<double>(xe - xs + 1),
          static_cast<double>(ye - ys + 1)};
}

std::vector<double> BoxIou(const std::vector<std::array<double, 4>>& dt,
                           const std::vector<std::array<double, 4>>& gt,
                           const std::vector<bool>& iscrowd) {
  const size_t n = gt.size();
  std::vector<double> out(dt.size() * n, 0.0);
  for (size_t g = 0; g < n; ++g) {
    const auto& G = gt[g];
    const double ga = G[2] * G[3];
    const bool crowd = !iscrowd.empty() && iscrowd[g];
    for (size_t d = 0; d < dt.size(); ++d) {
      const auto& D = dt[d];
      const double da = D[2] * D[3];
      const double w = std::fmin(D[2] + D[0], G[2] + G[0]) - std::fmax(D[0], G[0]);
      if (w <= 0)
        continue;
      const double h = std::fmin(D[3] + D[1], G[3] + G[1]) - std::fmax(D[1], G[1]);
      if (h <= 0)
        continue;
      const double i = w * h;
      const double u = crowd ? da : da + ga - i;
      out[d * n + g] = i / u;
    }
  }
  return out;
}

std::vector<double> RleIou(const std::vector<Rle>& dt, const std::vector<Rle>& gt,
                           const std::vector<bool>& iscrowd) {
  std::vector<std::array<double, 4>> db, gb;
  db.reserve(dt.size());
  gb.reserve(gt.size());
  for (const auto& r : dt)
    db.push_back(RleToBbox(r));
  for (const auto& r : gt)
    gb.push_back(RleToBbox(r));
  std::vector<double> out = BoxIou(db, gb, iscrowd);
  const size_t n = gt.size();
  for (size_t d = 0; d < dt.size(); ++d) {
    for (size_t g = 0; g < n; ++g) {
      double& o = out[d * n + g];
      if (!(o > 0))
        continue;  // boxes do not overlap: masks cannot either
      if (dt[d].height != gt[g].height || dt[d].width != gt[g].width) {
        o = -1;
        continue;
      }
      uint32_t inter = 0, uni = 0;
      WalkRunPair(dt[d].counts, gt[g].counts,
                  [&](uint32_t len, bool was_a, bool was_b, bool, bool, bool) {
                    if (was_a || was_b)
                      uni += len;
                    if (was_a && was_b)
                      inter += len;
                  });
      const bool crowd = !iscrowd.empty() && iscrowd[g];
      if (inter == 0) {
        uni = 1;
      } else if (crowd) {
        uni = static_cast<uint32_t>(RleArea(dt[d]));
      }
      o = static_cast<double>(inter) / static_cast<double>(uni);
    }
  }
  return out;
}

}  // namespace mrcnn::data
