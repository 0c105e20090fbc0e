#include "io/event_writer.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "crema/error.hpp"
#include "event.pb.h"

namespace crema {
namespace {

const std::array<uint32_t, 256>& Crc32cTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
      t[i] = crc;
    }
    return t;
  }();
  return table;
}

template <typename T>
void PutFixed(T value, std::string* out) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  out->append(bytes, sizeof(T));
}

tensorboard::Event NewEvent(double wall_time, int64_t step) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  return event;
}

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t Crc32c(const void* data, size_t size) {
  const auto& table = Crc32cTable();
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t MaskedCrc32c(const void* data, size_t size) {
  const uint32_t crc = Crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

std::string FrameRecord(const std::string& payload) {
  std::string record;
  std::string length;
  PutFixed(static_cast<uint64_t>(payload.size()), &length);
  record += length;
  PutFixed(MaskedCrc32c(length.data(), length.size()), &record);
  record += payload;
  PutFixed(MaskedCrc32c(payload.data(), payload.size()), &record);
  return record;
}

std::string EncodeFileVersionEvent(double wall_time) {
  tensorboard::Event event = NewEvent(wall_time, 0);
  event.set_file_version("brain.Event:2");
  return event.SerializeAsString();
}

std::string EncodeSessionStartEvent(double wall_time, int64_t step) {
  tensorboard::Event event = NewEvent(wall_time, step);
  event.mutable_session_log()->set_status(tensorboard::SessionLog::START);
  return event.SerializeAsString();
}

std::string EncodeScalarsEvent(double wall_time, int64_t step,
                               const std::vector<std::pair<std::string, float>>& scalars) {
  tensorboard::Event event = NewEvent(wall_time, step);
  tensorboard::Summary* summary = event.mutable_summary();
  for (const auto& [tag, value] : scalars) {
    tensorboard::Summary::Value* summary_value = summary->add_value();
    summary_value->set_tag(tag);
    summary_value->set_simple_value(value);
  }
  return event.SerializeAsString();
}

EventWriter::EventWriter(const std::string& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const double now = WallTime();
  path_ = (std::filesystem::path(folder) /
           StrCat("events.out.tfevents.", static_cast<int64_t>(now), ".", host))
              .string();
  file_ = std::fopen(path_.c_str(), "ab");
  if (!file_) CREMA_THROW_RUNTIME("cannot write the TensorBoard event file ", path_);
  Write(EncodeFileVersionEvent(now));
  Flush();
}

EventWriter::~EventWriter() {
  if (file_) std::fclose(file_);
}

void EventWriter::Write(const std::string& payload) {
  const std::string record = FrameRecord(payload);
  std::fwrite(record.data(), 1, record.size(), file_);
}

void EventWriter::AddScalars(int64_t step,
                             const std::vector<std::pair<std::string, float>>& scalars) {
  if (!scalars.empty()) Write(EncodeScalarsEvent(WallTime(), step, scalars));
}

void EventWriter::AddSessionStart(int64_t step) {
  Write(EncodeSessionStartEvent(WallTime(), step));
}

void EventWriter::Flush() { std::fflush(file_); }

}  // namespace crema
