#include "plot_metrics.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "crema/error.hpp"
#include "io/json.hpp"

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

double NumberField(const Json& record, const char* key, const std::string& where, bool required) {
  const Json* value = record.Find(key);
  if (value == nullptr) {
    if (required) CREMA_THROW_CONFIG(where, ": the record has no \"", key, "\"");
    return NAN;
  }
  if (value->type == Json::Type::kNull) return NAN;
  if (value->type != Json::Type::kNumber)
    CREMA_THROW_CONFIG(where, ": \"", key, "\" must be a number");
  return value->number;
}

Series* TestSeries(Run* run, const std::string& title) {
  for (auto& [name, series] : run->tests)
    if (name == title) return &series;
  run->tests.emplace_back(title, Series());
  return &run->tests.back().second;
}

}  // namespace

Run ReadMetrics(const std::string& path, bool x_seconds) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || fs::is_directory(path, ec)) CREMA_THROW_RUNTIME("cannot read ", path);
  Run run;
  run.path = path;
  std::string line;
  int line_number = 0, records = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const bool last_unterminated = in.eof();  // no newline after it: perhaps still being written
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = StrCat(path, ":", line_number);
    Json record;
    try {
      record = ParseJson(line);
    } catch (const JsonSyntaxError& e) {
      if (last_unterminated) {
        LOG(WARNING) << where << ": skipped an incomplete last line (the run is writing it, or "
                     << "was stopped while writing it)";
        break;
      }
      CREMA_THROW_CONFIG(where, ":", e.offset() + 1, ": not a JSON metrics record: ", e.message());
    }
    if (!record.is_object())
      CREMA_THROW_CONFIG(where, ": not a JSON metrics record: expected an object");
    const Json* phase = record.Find("phase");
    if (phase == nullptr || phase->type != Json::Type::kString)
      CREMA_THROW_CONFIG(where, ": the record has no \"phase\" string");
    if (phase->string != "train" && phase->string != "test") continue;  // other kinds: not plotted
    const double iter = NumberField(record, "iter", where, true);
    const double x = x_seconds ? NumberField(record, "time", where, true) : iter;
    if (!std::isfinite(x))
      CREMA_THROW_CONFIG(where, ": \"", x_seconds ? "time" : "iter", "\" must be a number");
    ++records;
    if (phase->string == "train") {
      run.loss.Add(x, NumberField(record, "loss", where, true));
      run.lr.Add(x, NumberField(record, "lr", where, false));
      continue;
    }
    const double net = NumberField(record, "net", where, false);
    const Json* outputs = record.Find("outputs");
    if (outputs == nullptr || !outputs->is_object())
      CREMA_THROW_CONFIG(where, ": a test record needs an \"outputs\" object");
    const std::string prefix = std::isfinite(net) && net != 0
                                   ? StrCat("test net #", static_cast<int>(net), ": ")
                                   : "test: ";
    for (const auto& [name, value] : outputs->object) {
      if (value.type != Json::Type::kNumber && value.type != Json::Type::kNull)
        CREMA_THROW_CONFIG(where, ": outputs.", name, " must be a number");
      TestSeries(&run, prefix + name)->Add(x, value.type == Json::Type::kNull ? NAN : value.number);
    }
  }
  if (records == 0) CREMA_THROW_CONFIG(path, ": no train or test records");
  return run;
}

// The legend names of the runs: their folders when those tell them apart, else their file
// names without _metrics.jsonl, else their paths.
void LabelRuns(std::vector<Run>* runs) {
  auto distinct = [&](auto name_of) {
    std::vector<std::string> names;
    for (const Run& run : *runs) names.push_back(name_of(run));
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return false;
    if (std::find(names.begin(), names.end(), "") != names.end()) return false;
    for (size_t i = 0; i < runs->size(); ++i) (*runs)[i].label = names[i];
    return true;
  };
  const auto folder = [](const Run& run) {
    return fs::absolute(run.path).lexically_normal().parent_path().filename().string();
  };
  const auto stem = [](const Run& run) {
    std::string name = fs::path(run.path).filename().string();
    for (const std::string suffix : {"_metrics.jsonl", ".jsonl"})
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        return name.substr(0, name.size() - suffix.size());
    return name;
  };
  if (runs->size() == 1 || distinct(folder) || distinct(stem)) {
    if (runs->size() == 1) (*runs)[0].label = stem((*runs)[0]);
    return;
  }
  for (Run& run : *runs) run.label = run.path;
}

// The trailing moving average of `window` points (fewer at the start).
Series MovingAverage(const Series& raw, int window) {
  Series out;
  double sum = 0;
  for (size_t i = 0; i < raw.y.size(); ++i) {
    sum += raw.y[i];
    if (i >= static_cast<size_t>(window)) sum -= raw.y[i - window];
    out.x.push_back(raw.x[i]);
    out.y.push_back(sum / static_cast<double>(std::min<size_t>(i + 1, window)));
  }
  return out;
}

}  // namespace crema::cli
