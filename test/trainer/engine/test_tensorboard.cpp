// TensorBoard event files: CRC-32C against the RFC 3720 vectors, TFRecord framing, and the
// events the writer produces decoded back with the same protos (the real reader,
// TensorBoard's EventAccumulator, is test_tensorboard_events.py).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "trainer/engine/events/tensorboard/crc32c.h"
#include "trainer/engine/events/tensorboard/tensorboard_event.pb.h"
#include "trainer/engine/events/tensorboard/tensorboard_writer.h"

using namespace mrcnn::engine;
namespace fs = std::filesystem;

namespace {

uint64_t LittleEndian(const std::string& bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<size_t>(i)]);
  return v;
}

// Every record of a TFRecord file, checking both masked CRCs.
std::vector<mrcnn::tensorboard::Event> ReadEvents(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<mrcnn::tensorboard::Event> events;
  size_t at = 0;
  while (at < bytes.size()) {
    REQUIRE(at + 12 <= bytes.size());
    const uint64_t length = LittleEndian(bytes, at, 8);
    REQUIRE(LittleEndian(bytes, at + 8, 4) == MaskedCrc32c(bytes.data() + at, 8));
    REQUIRE(at + 12 + length + 4 <= bytes.size());
    const std::string record = bytes.substr(at + 12, length);
    REQUIRE(LittleEndian(bytes, at + 12 + length, 4) == MaskedCrc32c(record.data(), record.size()));
    mrcnn::tensorboard::Event e;
    REQUIRE(e.ParseFromString(record));
    events.push_back(e);
    at += 12 + length + 4;
  }
  return events;
}

struct Dir {
  fs::path path = fs::temp_directory_path() / ("mrcnn_tb_" + std::to_string(::getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(path, ec))
      fs::remove(e.path(), ec);
    fs::remove(path, ec);
  }
};

}  // namespace

TEST_CASE("CRC-32C: RFC 3720 vectors, and TFRecord's mask", "[tensorboard]") {
  const char digits[] = "123456789";
  CHECK(Crc32c(digits, 9) == 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), up(32);
  for (int i = 0; i < 32; ++i)
    up[static_cast<size_t>(i)] = static_cast<unsigned char>(i);
  CHECK(Crc32c(zeros.data(), 32) == 0x8A9136AAu);
  CHECK(Crc32c(ones.data(), 32) == 0x62A8AB43u);
  CHECK(Crc32c(up.data(), 32) == 0x46DD794Eu);
  CHECK(Crc32c(digits + 4, 5, Crc32c(digits, 4)) == 0xE3069283u);
  const uint32_t crc = Crc32c(digits, 9);
  CHECK(MaskedCrc32c(digits, 9) == ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST_CASE("events: version, resume marker, per-iteration scalars, evaluations, media",
          "[tensorboard]") {
  Dir dir;
  EventStorage s;
  fs::path file;
  {
    TensorBoardWriter w(dir.path, {10, 8}, 3);
    file = w.file();
    CHECK(file.filename().string().rfind("events.out.tfevents.", 0) == 0);
    for (int i = 3; i < 5; ++i) {
      s.set_iteration(i);
      s.PutScalar("total_loss", 1.0 / (i + 1));
      s.PutScalar("time", 0.5);
      s.PutScalar("stop_requested", 0);
    }
    w.WriteTraining(s);
    s.PutEvaluation({5, "bbox", {0.25, 0.5}, {}});
    w.WriteEvaluations(s);
    w.WriteEvaluations(s);  // nothing new: nothing written
    s.PutHistogram({5, "weights/rpn.head", -1, 1, 4, 0, 2, {0, 1}, {2, 2}});
    s.PutImage({5, "val/0", 2, 3, 3, "png-bytes"});
    w.WriteMedia(s);
  }
  const auto events = ReadEvents(file);
  REQUIRE(events.size() == 7);
  CHECK(events[0].file_version() == "brain.Event:2");
  CHECK(events[1].session_log().status() == mrcnn::tensorboard::SessionLog::START);
  CHECK(events[1].step() == 4);                    // the first step this run writes
  CHECK(events[2].step() == 4);                    // iteration 3 done
  REQUIRE(events[2].summary().value_size() == 3);  // total_loss, time, images_per_sec; no vote
  std::map<std::string, float> v;
  for (const auto& value : events[2].summary().value())
    v[value.tag()] = value.simple_value();
  CHECK(v.at("train/total_loss") == Approx(0.25));
  CHECK(v.at("train/images_per_sec") == Approx(16.0));
  CHECK(events[3].step() == 5);
  CHECK(events[4].step() == 5);
  REQUIRE(events[4].summary().value_size() == 12);
  CHECK(events[4].summary().value(1).tag() == "eval/bbox/AP50");
  CHECK(events[4].summary().value(1).simple_value() == Approx(0.5));
  CHECK(events[5].summary().value(0).image().encoded_image_string() == "png-bytes");
  CHECK(events[5].summary().value(0).image().width() == 3);
  CHECK(events[6].summary().value(0).tag() == "weights/rpn.head");
  CHECK(events[6].summary().value(0).histo().bucket_size() == 2);
}

TEST_CASE("a run from iteration 0 has no resume marker", "[tensorboard]") {
  Dir dir;
  fs::path file;
  {
    TensorBoardWriter w(dir.path, {10, 8}, 0);
    file = w.file();
  }
  const auto events = ReadEvents(file);
  REQUIRE(events.size() == 1);
  CHECK(events[0].file_version() == "brain.Event:2");
}
