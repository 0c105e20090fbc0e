// TensorBoard event files: CRC-32C against published check values, the TFRecord framing read
// back by an independent reader written here, the Event/Summary encoding decoded field by field
// and compared with hand-worked bytes, and -- when Python's tensorboard package is installed --
// TensorBoard's own reader.
#include "io/event_writer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "event.pb.h"
#include "support/reference.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

TEST(Crc32c, KnownValues) {
  // RFC 3720 (iSCSI) appendix B.4 and the usual "123456789" check value.
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

// An independent TFRecord reader: checks both CRCs and returns the payloads.
std::vector<std::string> ReadRecords(const std::string& bytes) {
  auto masked = [](uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; };
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < bytes.size()) {
    EXPECT_GE(bytes.size() - pos, 12u);
    uint64_t length;
    uint32_t length_crc, data_crc;
    std::memcpy(&length, bytes.data() + pos, 8);
    std::memcpy(&length_crc, bytes.data() + pos + 8, 4);
    EXPECT_EQ(length_crc, masked(Crc32c(bytes.data() + pos, 8)));
    EXPECT_LE(pos + 12 + length + 4, bytes.size());
    const std::string payload = bytes.substr(pos + 12, length);
    std::memcpy(&data_crc, bytes.data() + pos + 12 + length, 4);
    EXPECT_EQ(data_crc, masked(Crc32c(payload.data(), payload.size())));
    records.push_back(payload);
    pos += 12 + length + 4;
  }
  return records;
}

// A minimal protobuf wire-format reader: field number -> raw values (varint as number, fixed as
// bytes, length-delimited as bytes).
struct Field {
  int wire_type;
  uint64_t varint = 0;
  std::string bytes;
};
std::multimap<int, Field> Decode(const std::string& message) {
  std::multimap<int, Field> fields;
  size_t pos = 0;
  auto varint = [&]() {
    uint64_t value = 0;
    for (int shift = 0; pos < message.size(); shift += 7) {
      const unsigned char byte = message[pos++];
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (!(byte & 0x80)) break;
    }
    return value;
  };
  while (pos < message.size()) {
    const uint64_t key = varint();
    Field field;
    field.wire_type = static_cast<int>(key & 7);
    if (field.wire_type == 0) {
      field.varint = varint();
    } else if (field.wire_type == 1 || field.wire_type == 5) {
      const size_t size = field.wire_type == 1 ? 8 : 4;
      field.bytes = message.substr(pos, size);
      pos += size;
    } else {
      EXPECT_EQ(field.wire_type, 2);
      const size_t size = varint();
      field.bytes = message.substr(pos, size);
      pos += size;
    }
    fields.emplace(static_cast<int>(key >> 3), field);
  }
  return fields;
}

TEST(EventWriter, WritesVersionThenScalars) {
  const fs::path folder = fs::path(testing::TempDir()) / "crema_events";
  fs::remove_all(folder);
  std::string path;
  {
    EventWriter writer(folder.string());
    path = writer.path();
    writer.AddScalars(7, {{"train/loss", 0.5f}, {"train/lr", 0.01f}});
    writer.AddSessionStart(5);
  }
  EXPECT_EQ(fs::path(path).parent_path(), folder);
  EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u);
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  const std::vector<std::string> records = ReadRecords(bytes.str());
  ASSERT_EQ(records.size(), 3u);

  auto first = Decode(records[0]);
  ASSERT_EQ(first.count(1), 1u);  // wall_time
  double wall_time;
  std::memcpy(&wall_time, first.find(1)->second.bytes.data(), 8);
  EXPECT_GT(wall_time, 1.6e9);
  ASSERT_EQ(first.count(3), 1u);
  EXPECT_EQ(first.find(3)->second.bytes, "brain.Event:2");

  auto second = Decode(records[1]);
  ASSERT_EQ(second.count(2), 1u);
  EXPECT_EQ(second.find(2)->second.varint, 7u);  // step
  ASSERT_EQ(second.count(5), 1u);                // summary
  auto summary = Decode(second.find(5)->second.bytes);
  ASSERT_EQ(summary.count(1), 2u);
  std::map<std::string, float> values;
  for (auto it = summary.lower_bound(1); it != summary.upper_bound(1); ++it) {
    auto value = Decode(it->second.bytes);
    float simple_value;
    ASSERT_EQ(value.count(2), 1u);
    std::memcpy(&simple_value, value.find(2)->second.bytes.data(), 4);
    values[value.find(1)->second.bytes] = simple_value;
  }
  EXPECT_EQ(values["train/loss"], 0.5f);
  EXPECT_EQ(values["train/lr"], 0.01f);

  auto third = Decode(records[2]);
  EXPECT_EQ(third.find(2)->second.varint, 5u);
  ASSERT_EQ(third.count(6), 1u);                                              // session_log
  EXPECT_EQ(Decode(third.find(6)->second.bytes).find(1)->second.varint, 1u);  // START
}

// The payloads are serialized proto/event.proto messages; byte for byte what TensorFlow's schema
// gives (worked out by hand from its field numbers).
TEST(EventWriter, PayloadsAreEventMessages) {
  const std::string scalars = EncodeScalarsEvent(1.5, 7, {{"a", 0.5f}});
  const std::string expected =
      std::string("\x09\x00\x00\x00\x00\x00\x00\xf8\x3f", 9) +  // wall_time
      std::string("\x10\x07", 2) +                              // step
      std::string(
          "\x2a\x0a\x0a\x08\x0a\x01"
          "a"
          "\x15\x00\x00\x00\x3f",
          12);
  EXPECT_EQ(scalars, expected);
  tensorboard::Event event;
  ASSERT_TRUE(event.ParseFromString(scalars));
  EXPECT_EQ(event.wall_time(), 1.5);
  EXPECT_EQ(event.step(), 7);
  ASSERT_EQ(event.summary().value_size(), 1);
  EXPECT_EQ(event.summary().value(0).tag(), "a");
  EXPECT_EQ(event.summary().value(0).simple_value(), 0.5f);

  ASSERT_TRUE(event.ParseFromString(EncodeFileVersionEvent(2.0)));
  EXPECT_EQ(event.file_version(), "brain.Event:2");
  EXPECT_EQ(event.step(), 0);
  ASSERT_TRUE(event.ParseFromString(EncodeSessionStartEvent(2.0, 40)));
  EXPECT_EQ(event.what_case(), tensorboard::Event::kSessionLog);
  EXPECT_EQ(event.session_log().status(), tensorboard::SessionLog::START);
  EXPECT_EQ(event.step(), 40);
  // A zero scalar is still written (simple_value sits in a oneof).
  ASSERT_TRUE(event.ParseFromString(EncodeScalarsEvent(2.0, 1, {{"z", 0.0f}})));
  ASSERT_EQ(event.summary().value_size(), 1);
  EXPECT_TRUE(event.summary().value(0).has_simple_value());
}

// TensorBoard's own reader, when its Python package is installed (scripts/setup.sh tries).
TEST(EventWriter, TensorBoardReadsTheScalars) {
  if (std::system("python3 -c 'import tensorboard.backend.event_processing.event_accumulator' "
                  ">/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Python's tensorboard package is not installed";
  const fs::path folder = fs::path(testing::TempDir()) / "crema_events_tb";
  fs::remove_all(folder);
  {
    EventWriter writer(folder.string());
    for (int step = 0; step < 5; ++step)
      writer.AddScalars(step * 10, {{"train/loss", 1.0f / (step + 1)}});
  }
  const std::string script = (folder / "read.py").string();
  std::ofstream(script) << "import sys\n"
                           "from tensorboard.backend.event_processing import event_accumulator\n"
                           "acc = event_accumulator.EventAccumulator(sys.argv[1])\n"
                           "acc.Reload()\n"
                           "for e in acc.Scalars('train/loss'):\n"
                           "    print(e.step, repr(e.value))\n";
  const std::string out = (folder / "out.txt").string();
  ASSERT_EQ(std::system(("python3 " + script + " " + folder.string() + " > " + out).c_str()), 0);
  std::ifstream in(out);
  int step;
  double value;
  int count = 0;
  while (in >> step >> value) {
    EXPECT_EQ(step, count * 10);
    EXPECT_FLOAT_EQ(value, 1.0f / (count + 1));
    ++count;
  }
  EXPECT_EQ(count, 5);
}

}  // namespace
}  // namespace crema
