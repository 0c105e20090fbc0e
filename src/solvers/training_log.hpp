#pragma once
// What a training run leaves beside its snapshots for people and tools to watch:
// <snapshot_prefix>_metrics.jsonl, one JSON object per line --
//   {"iter": 100, "phase": "train", "time": 12.5, "lr": 0.01, "loss": 0.31, "smoothed_loss": 0.35,
//    "outputs": {"loss": 0.31}}
//   {"iter": 500, "phase": "test", "net": 0, "time": 60.2, "outputs": {"accuracy": 0.89, ...}}
// ("time" is seconds since the run started; "iter" counts the updates applied before the record,
// as Caffe's log) -- and TensorBoard event files in <snapshot_prefix>_tensorboard/ with the same
// scalars (train/lr, train/loss, train/smoothed_loss, train/<output>, test/<output> or
// test<net>/<output>). A resumed run cuts the metrics file back to the records before the restored
// iteration and tells TensorBoard to drop the steps from there on of the earlier run.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/event_writer.hpp"

namespace crema {

using Scores = std::vector<std::pair<std::string, double>>;

class TrainingLog {
 public:
  // Either file may be off ("" for the metrics path, false for TensorBoard).
  TrainingLog(const std::string& metrics_path, const std::string& tensorboard_dir, int start_iter);
  ~TrainingLog();
  TrainingLog(const TrainingLog&) = delete;
  TrainingLog& operator=(const TrainingLog&) = delete;

  void Iteration(int iter, double seconds, double lr, double loss, double smoothed_loss,
                 const Scores& outputs);
  void Test(int iter, double seconds, int net_id, const Scores& scores);
  void Flush();

 private:
  std::FILE* metrics_ = nullptr;
  std::unique_ptr<EventWriter> events_;
};

// Rewrites a metrics file keeping the records whose "iter" is below `first_iter` (a run resumed
// at first_iter writes the later ones again).
void TruncateMetrics(const std::string& path, int first_iter);

}  // namespace crema
