#pragma once
// Fine-tuning for `crema train`: copying --weights into the solver's nets with a per-layer
// report (--skip-mismatched), and freezing layers by name (--freeze REGEX).
#include <string>
#include <vector>

#include "crema/solver.hpp"

namespace crema::cli {

// Copies each file, in order, into the train net and every test net (later files overwrite
// earlier ones), then prints on stdout, for each layer of the train net with params, where its
// values came from: a file, its fillers (no layer of that name), or its fillers because of a
// shape mismatch (only with `skip_mismatched`; otherwise a mismatch is a ConfigError). A file
// that holds none of the train net's layers with params is warned about (an empty file?).
void CopyWeightsWithReport(Solver* solver, const std::vector<std::string>& files,
                           bool skip_mismatched);
// The regular expressions of --freeze: repetitions and comma-separated lists (a comma inside
// {m,n} belongs to the expression).
std::vector<std::string> FreezePatterns(const std::string& flag);
// Sets lr_mult 0 on every param of the train net's layers whose names fully match one of the
// ECMAScript regular expressions and prints them; ConfigError for a bad expression or one that
// matches no layer with params.
void FreezeMatchingLayers(Solver* solver, const std::vector<std::string>& patterns);

}  // namespace crema::cli
