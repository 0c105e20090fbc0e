#pragma once
// "Did you mean": the one edit distance behind every suggestion for a misspelt name (layer and
// solver types, prototxt fields and enum values, plugin attributes, --set paths, bottoms).
#include <set>
#include <string>
#include <vector>

namespace crema {

// Levenshtein distance with ASCII letters compared case-insensitively (bytes above 127, as in
// UTF-8 names, compare as themselves).
size_t EditDistance(const std::string& a, const std::string& b);

// The candidate closest to `name` when it looks like a typo of it (an edit distance of at most
// max(2, length / 3)), else ""; the first in order among equally close ones.
std::string ClosestName(const std::string& name, const std::vector<std::string>& candidates);
std::string ClosestName(const std::string& name, const std::set<std::string>& candidates);

}  // namespace crema
