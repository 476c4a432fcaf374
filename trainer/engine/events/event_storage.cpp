#include "trainer/engine/events/event_storage.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>

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

double ScalarHistory::At(int64_t iteration) const {
  for (auto it = values_.rbegin(); it != values_.rend(); ++it)
    if (it->first == iteration)
      return it->second;
  throw std::logic_error("ScalarHistory::At: no value at iteration " + std::to_string(iteration));
}

void ScalarHistory::ReplaceAt(int64_t iteration, double value) {
  for (auto it = values_.rbegin(); it != values_.rend(); ++it) {
    if (it->first == iteration) {
      it->second = value;
      return;
    }
  }
  throw std::logic_error("ScalarHistory::ReplaceAt: no value at iteration " +
                         std::to_string(iteration));
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
  PutScalarAt(name, iteration_, value, reduce);
}

void EventStorage::PutScalarAt(const std::string& name, int64_t iteration, double value,
                               RankReduce reduce) {
  ScalarHistory& h = scalars_[name];
  if (!h.empty() && h.LatestIteration() > iteration) {
    throw std::logic_error("EventStorage::PutScalarAt: \"" + name + "\" at iteration " +
                           std::to_string(iteration) + " after iteration " +
                           std::to_string(h.LatestIteration()));
  }
  h.Put(iteration, value);
  if (reduce == RankReduce::kMean && world_size_ > 1)
    pending_means_.emplace_back(name, iteration);
}

void EventStorage::AddRankVote(const std::string& name, std::function<bool()> local_vote) {
  votes_.emplace_back(name, std::move(local_vote));
}

void EventStorage::SyncRanks() {
  SyncPending(/*with_votes=*/true);
}

void EventStorage::SyncMeans() {
  SyncPending(/*with_votes=*/false);
}

void EventStorage::SyncPending(bool with_votes) {
  // (name, iteration) order, so that every rank packs the same vector whatever order the
  // values were put in.
  std::sort(pending_means_.begin(), pending_means_.end());
  pending_means_.erase(std::unique(pending_means_.begin(), pending_means_.end()),
                       pending_means_.end());
  std::vector<double> packed;
  packed.reserve(pending_means_.size() + (with_votes ? votes_.size() : 0));
  for (const auto& [name, iteration] : pending_means_)
    packed.push_back(scalars_.at(name).At(iteration));
  if (with_votes)
    for (const auto& vote : votes_)
      packed.push_back(vote.second() ? 1.0 : 0.0);
  if (world_size_ > 1 && !packed.empty())
    rank_sum_(packed);
  size_t i = 0;
  const double w = static_cast<double>(world_size_);
  for (const auto& [name, iteration] : pending_means_)
    scalars_[name].ReplaceAt(iteration, packed[i++] / w);
  if (with_votes)
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
