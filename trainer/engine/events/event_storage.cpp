#include "trainer/engine/events/event_storage.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace mrcnn::engine {

void ScalarHistory::Put(int64_t iteration, double value) {
  values_.emplace_back(iteration, value);
  while (values_.size() > max_length_)
    values_.pop_front();
}

void ScalarHistory::ReplaceLatest(double value) {
  if (values_.empty())
    throw std::logic_error("ScalarHistory::ReplaceLatest: no value was put");
  values_.back().second = value;
}

double ScalarHistory::Latest() const {
  if (values_.empty())
    throw std::logic_error("ScalarHistory::Latest: no value was put");
  return values_.back().second;
}

int64_t ScalarHistory::LatestIteration() const {
  if (values_.empty())
    throw std::logic_error("ScalarHistory::LatestIteration: no value was put");
  return values_.back().first;
}

std::pair<ScalarHistory::Values::const_iterator, ScalarHistory::Values::const_iterator>
ScalarHistory::After(int64_t after) const {
  auto first = values_.end();
  while (first != values_.begin() && std::prev(first)->first > after)
    --first;
  return {first, values_.end()};
}

std::optional<double> ScalarHistory::MeanAfter(int64_t after) const {
  const auto [first, last] = After(after);
  if (first == last)
    return std::nullopt;
  double sum = 0;
  int64_t count = 0;
  for (auto it = first; it != last; ++it, ++count)
    sum += it->second;
  return sum / static_cast<double>(count);
}

double ScalarHistory::Median(size_t window) const {
  if (values_.empty())
    throw std::logic_error("ScalarHistory::Median: no value was put");
  const size_t n = std::min(window, values_.size());
  std::vector<double> v;
  v.reserve(n);
  for (auto it = values_.end() - static_cast<std::ptrdiff_t>(n); it != values_.end(); ++it)
    v.push_back(it->second);
  std::sort(v.begin(), v.end());
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

EventStorage::EventStorage(int64_t world_size, RankSum rank_sum)
    : world_size_(world_size), rank_sum_(std::move(rank_sum)) {
  if (world_size_ < 1)
    throw std::invalid_argument("EventStorage: world_size must be >= 1");
  if (world_size_ > 1 && !rank_sum_)
    throw std::invalid_argument("EventStorage: world_size > 1 needs a rank_sum collective");
}

void EventStorage::PutScalar(const std::string& name, double value, RankReduce reduce) {
  scalars_[name].Put(iteration_, value);
  if (reduce == RankReduce::kMean && world_size_ > 1)
    pending_means_.push_back(name);
}

void EventStorage::AddRankVote(const std::string& name, std::function<bool()> local_vote) {
  votes_.emplace_back(name, std::move(local_vote));
}

void EventStorage::SyncRanks() {
  // Name order, so that every rank packs the same vector whatever order the values were
  // put in.
  std::sort(pending_means_.begin(), pending_means_.end());
  pending_means_.erase(std::unique(pending_means_.begin(), pending_means_.end()),
                       pending_means_.end());
  std::vector<double> packed;
  packed.reserve(pending_means_.size() + votes_.size());
  for (const auto& name : pending_means_) {
    const auto& h = scalars_.at(name);
    if (h.LatestIteration() != iteration_) {
      throw std::logic_error("EventStorage::SyncRanks: \"" + name +
                             "\" was put at another iteration");
    }
    packed.push_back(h.Latest());
  }
  for (const auto& vote : votes_)
    packed.push_back(vote.second() ? 1.0 : 0.0);
  if (world_size_ > 1 && !packed.empty())
    rank_sum_(packed);
  size_t i = 0;
  const double w = static_cast<double>(world_size_);
  for (const auto& name : pending_means_)
    scalars_[name].ReplaceLatest(packed[i++] / w);
  for (const auto& vote : votes_)
    scalars_[vote.first].Put(iteration_, packed[i++] > 0 ? 1.0 : 0.0);
  pending_means_.clear();
}

const ScalarHistory& EventStorage::History(const std::string& name) const {
  auto it = scalars_.find(name);
  if (it == scalars_.end())
    throw std::out_of_range("EventStorage: no scalar named \"" + name + "\" was put");
  return it->second;
}

void EventStorage::ClearMedia() {
  images_.clear();
  histograms_.clear();
}

}  // namespace mrcnn::engine
