#include "trainer/engine/events/tensorboard/tensorboard_writer.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <map>

#include "trainer/engine/events/tensorboard/tensorboard_event.pb.h"
#include "trainer/engine/events/tensorboard/tfrecord_file.h"

namespace mrcnn::engine {
namespace {

namespace tb = mrcnn::tensorboard;

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::filesystem::path NewEventFile(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const auto seconds = static_cast<long long>(WallTime());
  return dir / ("events.out.tfevents." + std::to_string(seconds) + "." + host + "." +
                std::to_string(::getpid()));
}

void Append(TfRecordFile& file, const tb::Event& event) {
  file.Append(event.SerializeAsString());
}

tb::Event EventAt(int64_t step) {
  tb::Event e;
  e.set_wall_time(WallTime());
  e.set_step(step);
  return e;
}

const std::array<const char*, 12> kCocoNames = {"AP",  "AP50", "AP75",  "APs", "APm", "APl",
                                                "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};

}  // namespace

bool IsTensorBoardScalar(const std::string& name) {
  return name != "stop_requested" && name != "eta_seconds" && name != "checkpoint/saved";
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir, TrainWindowSpec spec,
                                     int64_t start_iter)
    : WindowedEventWriter(start_iter),
      file_(std::make_unique<TfRecordFile>(NewEventFile(dir))),
      spec_(spec) {
  tb::Event version = EventAt(0);
  version.set_file_version("brain.Event:2");
  Append(*file_, version);
  if (start_iter > 0) {
    // TensorBoard drops what it read before with step >= this one: the steps the killed
    // run wrote after its checkpoint, which this run writes again.
    tb::Event start = EventAt(start_iter + 1);
    start.mutable_session_log()->set_status(tb::SessionLog::START);
    Append(*file_, start);
  }
  file_->Flush();
}

TensorBoardWriter::~TensorBoardWriter() = default;

const std::filesystem::path& TensorBoardWriter::file() const {
  return file_->path();
}

void TensorBoardWriter::WriteWindow(const EventStorage& storage, int64_t last_written) {
  // One event per iteration holding every scalar of that iteration, in step order.
  std::map<int64_t, tb::Event> by_step;
  for (const auto& [name, history] : storage.scalars()) {
    if (!IsTensorBoardScalar(name))
      continue;
    const auto [first, last] = history.After(last_written);
    for (auto entry = first; entry != last; ++entry) {
      const auto& [iteration, value] = *entry;
      auto [it, fresh] = by_step.try_emplace(iteration + 1, EventAt(iteration + 1));
      auto* v = it->second.mutable_summary()->add_value();
      v->set_tag("train/" + name);
      v->set_simple_value(static_cast<float>(value));
      if (name == "time" && value > 0) {
        auto* ips = it->second.mutable_summary()->add_value();
        ips->set_tag("train/images_per_sec");
        ips->set_simple_value(
            static_cast<float>(static_cast<double>(spec_.images_per_iteration) / value));
      }
    }
  }
  for (const auto& [step, event] : by_step)
    Append(*file_, event);
  file_->Flush();
}

void TensorBoardWriter::WriteEvaluation(const EvaluationEvent& ev) {
  tb::Event e = EventAt(ev.iteration);
  for (size_t k = 0; k < kCocoNames.size(); ++k) {
    auto* v = e.mutable_summary()->add_value();
    v->set_tag("eval/" + ev.iou_type + "/" + kCocoNames[k]);
    v->set_simple_value(static_cast<float>(ev.stats[k]));
  }
  Append(*file_, e);
}

void TensorBoardWriter::EvaluationsWritten() {
  file_->Flush();
}

void TensorBoardWriter::WriteMedia(const EventStorage& storage) {
  if (storage.images().empty() && storage.histograms().empty())
    return;
  for (const ImageEvent& image : storage.images()) {
    tb::Event e = EventAt(image.iteration);
    auto* v = e.mutable_summary()->add_value();
    v->set_tag(image.tag);
    auto* img = v->mutable_image();
    img->set_height(image.height);
    img->set_width(image.width);
    img->set_colorspace(image.channels);
    img->set_encoded_image_string(image.encoded_png);
    Append(*file_, e);
  }
  for (const HistogramEvent& h : storage.histograms()) {
    tb::Event e = EventAt(h.iteration);
    auto* v = e.mutable_summary()->add_value();
    v->set_tag(h.tag);
    auto* histo = v->mutable_histo();
    histo->set_min(h.min);
    histo->set_max(h.max);
    histo->set_num(h.num);
    histo->set_sum(h.sum);
    histo->set_sum_squares(h.sum_squares);
    for (double limit : h.bucket_limits)
      histo->add_bucket_limit(limit);
    for (double count : h.bucket_counts)
      histo->add_bucket(count);
    Append(*file_, e);
  }
  file_->Flush();
}

void TensorBoardWriter::Close() {
  file_->Flush();
}

}  // namespace mrcnn::engine
