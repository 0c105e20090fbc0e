#include "core/closest_name.hpp"

#include <algorithm>
#include <cctype>

namespace crema {
namespace {

// std::tolower takes an unsigned char's value (or EOF); a plain char above 127 is negative.
int Lower(char c) { return std::tolower(static_cast<unsigned char>(c)); }

template <typename Names>
std::string Closest(const std::string& name, const Names& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = EditDistance(name, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

}  // namespace

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = Lower(a[i - 1]) == Lower(b[j - 1]);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string ClosestName(const std::string& name, const std::vector<std::string>& candidates) {
  return Closest(name, candidates);
}

std::string ClosestName(const std::string& name, const std::set<std::string>& candidates) {
  return Closest(name, candidates);
}

}  // namespace crema
