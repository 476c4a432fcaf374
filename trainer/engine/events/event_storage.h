#pragma once
// Every number a training run produces, in one place, as Detectron2's EventStorage: the
// step and the hooks put scalars (losses, lr, timings, memory), evaluation results,
// images and histograms; writers (event_writer.h) read them at their own period. The
// storage knows the iteration being run (set by TrainerBase before each step).
//
// Cross-rank values: a scalar put with RankReduce::kMean is pending until SyncRanks(),
// which TrainerBase calls once after every step: all pending means and every registered
// vote travel in one sum over the ranks (the caller's collective), so a data-parallel job
// pays one small all-reduce per iteration for its log and its stop agreement. Every rank
// must put the same kMean names at the same iterations in the same call (they run the
// same step), or the collective's size check fails. Values can arrive late: the training
// step keeps its losses on the device and puts a whole logging window at once
// (PutScalarAt, then SyncMeans). Torch-free.
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mrcnn::engine {

enum class RankReduce {
  kLocal,  // this process's value
  kMean,   // the mean over the ranks, after SyncRanks()
};

// The values one scalar took, oldest first, each with its iteration; the oldest are
// dropped beyond `max_length`.
class ScalarHistory {
 public:
  explicit ScalarHistory(size_t max_length = 100000) : max_length_(max_length) {}
  void Put(int64_t iteration, double value);
  // Overwrites the newest value (a cross-rank mean replacing the local one).
  void ReplaceLatest(double value);
  // The value put at `iteration`, and overwriting it; searched from the newest end (the
  // values of a late window are the newest). Throw std::logic_error when there is none.
  double At(int64_t iteration) const;
  void ReplaceAt(int64_t iteration, double value);
  bool empty() const { return values_.empty(); }
  // The newest value and its iteration; throw std::logic_error when empty.
  double Latest() const;
  int64_t LatestIteration() const;
  // The values put at iterations > `after`, oldest first: found from the newest end, so
  // a writer's window costs its own length, not the history's.
  using Values = std::deque<std::pair<int64_t, double>>;
  std::pair<Values::const_iterator, Values::const_iterator> After(int64_t after) const;
  // Mean of After(after), summed oldest first (a writer's window since its last write);
  // nullopt when there are none.
  std::optional<double> MeanAfter(int64_t after) const;
  // Median of the newest `window` values (all when fewer); throws when empty.
  double Median(size_t window) const;
  const Values& values() const { return values_; }

 private:
  size_t max_length_;
  Values values_;
};

// One COCO evaluation: stats are COCOeval's 12 numbers (AP, AP50, AP75, APs, APm, APl,
// AR1, AR10, AR100, ARs, ARm, ARl), fractions, -1 where undefined.
struct EvaluationEvent {
  int64_t iteration = 0;  // completed iterations when it ran
  std::string iou_type;   // "bbox" | "segm"
  std::array<double, 12> stats{};
  // AP@[.5:.95] per category (name, AP; -1 when the category has no ground truth).
  std::vector<std::pair<std::string, double>> per_category;
};

// An image for writers that show pictures (e.g. predictions drawn on a validation image).
struct ImageEvent {
  int64_t iteration = 0;
  std::string tag;
  int height = 0, width = 0, channels = 0;
  std::string encoded_png;
};

// A histogram of a tensor's values (TensorBoard's HistogramProto fields).
struct HistogramEvent {
  int64_t iteration = 0;
  std::string tag;
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limits, bucket_counts;
};

class EventStorage {
 public:
  // Sums every element of the vector over the ranks, in place, identically on all ranks.
  using RankSum = std::function<void(std::vector<double>&)>;

  // One process: SyncRanks() only evaluates the votes. With world_size > 1 a rank_sum is
  // required.
  EventStorage() = default;
  EventStorage(int64_t world_size, RankSum rank_sum);

  void set_iteration(int64_t iteration) { iteration_ = iteration; }
  // The iteration being run (0-based).
  int64_t iteration() const { return iteration_; }

  void PutScalar(const std::string& name, double value, RankReduce reduce = RankReduce::kLocal);
  // A value of an earlier iteration (or this one), put late. Iterations of one scalar must
  // be put in order: throws std::logic_error for one before the newest.
  void PutScalarAt(const std::string& name, int64_t iteration, double value,
                   RankReduce reduce = RankReduce::kLocal);
  // `local_vote` is asked at every SyncRanks(); the scalar `name` then holds 1 when any
  // rank voted yes, else 0 (e.g. "stop_requested": SIGTERM reaches ranks at different
  // moments, the vote makes them act at the same iteration).
  void AddRankVote(const std::string& name, std::function<bool()> local_vote);
  // Replaces the pending kMean values by their cross-rank means and records the votes;
  // one collective when world_size > 1.
  void SyncRanks();
  // SyncRanks without the votes: for values put late (PutScalarAt), at a point every rank
  // reaches in the same iteration; no collective when nothing is pending.
  void SyncMeans();

  bool Has(const std::string& name) const { return scalars_.count(name) != 0; }
  // Throws std::out_of_range naming the scalar when it was never put.
  const ScalarHistory& History(const std::string& name) const;
  const std::map<std::string, ScalarHistory>& scalars() const { return scalars_; }

  void PutEvaluation(EvaluationEvent event) { evaluations_.push_back(std::move(event)); }
  // Oldest first; writers remember how many they have written.
  const std::vector<EvaluationEvent>& evaluations() const { return evaluations_; }

  void PutImage(ImageEvent image) { images_.push_back(std::move(image)); }
  void PutHistogram(HistogramEvent histogram) { histograms_.push_back(std::move(histogram)); }
  const std::vector<ImageEvent>& images() const { return images_; }
  const std::vector<HistogramEvent>& histograms() const { return histograms_; }
  // Drops images and histograms once every writer has had them (PeriodicWriterHook).
  void ClearMedia();

 private:
  int64_t iteration_ = 0;
  int64_t world_size_ = 1;
  RankSum rank_sum_;
  std::map<std::string, ScalarHistory> scalars_;
  void SyncPending(bool with_votes);
  std::vector<std::pair<std::string, int64_t>> pending_means_;  // name, iteration
  std::vector<std::pair<std::string, std::function<bool()>>> votes_;
  std::vector<EvaluationEvent> evaluations_;
  std::vector<ImageEvent> images_;
  std::vector<HistogramEvent> histograms_;
};

}  // namespace mrcnn::engine
