#include "solvers/training_log.hpp"

#include <glog/logging.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "io/json.hpp"

namespace crema {
namespace {

std::string JsonObject(const Scores& scores) {
  std::string out = "{";
  for (size_t i = 0; i < scores.size(); ++i)
    out += (i ? ", " : "") + JsonQuote(scores[i].first) + ": " + JsonNumber(scores[i].second);
  return out + "}";
}

}  // namespace

void TruncateMetrics(const std::string& path, int first_iter) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::string kept;
  const std::string key = "{\"iter\": ";
  // Whole lines only: a run killed while writing a record leaves it without its newline (and
  // perhaps with a shorter "iter"), which must not stay in the middle of the resumed file.
  size_t start = 0;
  for (size_t end = text.find('\n'); end != std::string::npos;
       start = end + 1, end = text.find('\n', start)) {
    const std::string line = text.substr(start, end - start);
    if (line.compare(0, key.size(), key) == 0 && std::atol(line.c_str() + key.size()) >= first_iter)
      continue;
    kept += line + "\n";
  }
  WriteFileAtomically(path, kept);
}

TrainingLog::TrainingLog(const std::string& metrics_path, const std::string& tensorboard_dir,
                         int start_iter) {
  if (!metrics_path.empty()) {
    if (start_iter > 0) {
      TruncateMetrics(metrics_path, start_iter);
    } else {
      std::error_code ec;
      std::filesystem::remove(metrics_path, ec);  // a new run from iteration 0
    }
    metrics_ = std::fopen(metrics_path.c_str(), "a");
    if (!metrics_) CREMA_THROW_RUNTIME("cannot write the metrics file ", metrics_path);
    // Line-buffered: each record reaches the file whole, as it is written, so a run killed after
    // a snapshot has every record before the snapshot's iteration (a resume keeps exactly
    // those), and a reader watching the file sees each iteration.
    std::setvbuf(metrics_, nullptr, _IOLBF, 1 << 16);
    LOG(INFO) << "Metrics: " << metrics_path;
  }
  if (!tensorboard_dir.empty()) {
    events_ = std::make_unique<EventWriter>(tensorboard_dir);
    if (start_iter > 0) events_->AddSessionStart(start_iter);
    LOG(INFO) << "TensorBoard events: " << events_->path();
  }
}

TrainingLog::~TrainingLog() {
  if (metrics_) std::fclose(metrics_);
}

void TrainingLog::Iteration(int iter, double seconds, double lr, double loss, double smoothed_loss,
                            const Scores& outputs) {
  if (metrics_)
    std::fprintf(metrics_,
                 "{\"iter\": %d, \"phase\": \"train\", \"time\": %.3f, \"lr\": %s, \"loss\": %s, "
                 "\"smoothed_loss\": %s, \"outputs\": %s}\n",
                 iter, seconds, JsonNumber(lr).c_str(), JsonNumber(loss).c_str(),
                 JsonNumber(smoothed_loss).c_str(), JsonObject(outputs).c_str());
  if (events_) {
    std::vector<std::pair<std::string, float>> scalars = {
        {"train/lr", static_cast<float>(lr)},
        {"train/loss", static_cast<float>(loss)},
        {"train/smoothed_loss", static_cast<float>(smoothed_loss)}};
    for (const auto& [name, value] : outputs)
      if (name != "loss") scalars.emplace_back("train/" + name, static_cast<float>(value));
    events_->AddScalars(iter, scalars);
  }
}

void TrainingLog::Test(int iter, double seconds, int net_id, const Scores& scores) {
  if (metrics_)
    std::fprintf(metrics_,
                 "{\"iter\": %d, \"phase\": \"test\", \"net\": %d, \"time\": %.3f, "
                 "\"outputs\": %s}\n",
                 iter, net_id, seconds, JsonObject(scores).c_str());
  if (events_) {
    const std::string prefix = net_id == 0 ? "test/" : StrCat("test", net_id, "/");
    std::vector<std::pair<std::string, float>> scalars;
    for (const auto& [name, value] : scores)
      scalars.emplace_back(prefix + name, static_cast<float>(value));
    events_->AddScalars(iter, scalars);
  }
  Flush();
}

void TrainingLog::Flush() {
  if (metrics_) std::fflush(metrics_);
  if (events_) events_->Flush();
}

}  // namespace crema
