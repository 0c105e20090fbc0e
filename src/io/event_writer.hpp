#pragma once
// TensorBoard event files: the TFRecord framing (length, masked CRC-32C of the length, payload,
// masked CRC-32C of the payload) around serialized Event messages (proto/event.proto, TensorFlow's
// field numbers; crema needs no TensorFlow). The first record carries file_version
// "brain.Event:2"; each scalar is an Event{wall_time, step, summary{value{tag, simple_value}}}.
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace crema {

// CRC-32C (Castagnoli), and the rotated-plus-constant form TFRecord stores.
uint32_t Crc32c(const void* data, size_t size);
uint32_t MaskedCrc32c(const void* data, size_t size);

// The bytes of one TFRecord around `payload`.
std::string FrameRecord(const std::string& payload);
// Serialized Event messages.
std::string EncodeFileVersionEvent(double wall_time);
// A SessionLog START at `step`: TensorBoard then drops the steps after it written earlier (a
// resumed run replacing the end of an interrupted one).
std::string EncodeSessionStartEvent(double wall_time, int64_t step);
std::string EncodeScalarsEvent(double wall_time, int64_t step,
                               const std::vector<std::pair<std::string, float>>& scalars);

class EventWriter {
 public:
  // Creates `folder` when needed and opens events.out.tfevents.<seconds>.<host> in it; throws
  // RuntimeError when it cannot.
  explicit EventWriter(const std::string& folder);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void AddScalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
  void AddSessionStart(int64_t step);
  void Flush();
  const std::string& path() const { return path_; }

 private:
  void Write(const std::string& payload);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace crema
