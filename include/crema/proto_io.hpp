#pragma once
// Reading and writing Caffe's files: prototxt (text, with source locations for error messages),
// binary protos (.caffemodel, .solverstate, .binaryproto), with legacy formats upgraded.
#include <google/protobuf/text_format.h>

#include <memory>
#include <string>
#include <vector>

#include "crema/blob.hpp"
#include "crema/proto.hpp"

namespace crema {

// A parsed prototxt and the positions of its fields, so errors can say file:line:col.
class ProtoSource {
 public:
  ProtoSource(std::string path, std::unique_ptr<google::protobuf::TextFormat::ParseInfoTree> tree)
      : path_(std::move(path)), tree_(std::move(tree)) {}
  const std::string& path() const { return path_; }
  // Location of `field_path` ("layer[3].convolution_param.kernel_size", "base_lr"); falls back to
  // the nearest enclosing field that has a location, then to the file alone.
  std::string Locate(const google::protobuf::Message& root, const std::string& field_path) const;

 private:
  std::string path_;
  std::unique_ptr<google::protobuf::TextFormat::ParseInfoTree> tree_;
};

// Parses a text proto; ConfigError "file:line:col: message" on syntax errors and unknown
// fields (with a "did you mean" suggestion), RuntimeError when the file can't be read.
std::shared_ptr<ProtoSource> ReadTextProto(const std::string& path,
                                           google::protobuf::Message* message);
// Parses text already in memory; `name` is used in error messages.
std::shared_ptr<ProtoSource> ParseTextProto(const std::string& text, const std::string& name,
                                            google::protobuf::Message* message);
// Like ParseTextProto, but collects problems instead of throwing at the first: every unknown field
// (skipped, each "name:line:col: unknown field ...; did you mean ...") and the first syntax error
// (after which parsing stops; `*syntax_ok` is then false). The source is returned either way.
std::shared_ptr<ProtoSource> ParseTextProtoCollecting(const std::string& text,
                                                      const std::string& name,
                                                      google::protobuf::Message* message,
                                                      std::vector<std::string>* problems,
                                                      bool* syntax_ok);
void ReadBinaryProto(const std::string& path, google::protobuf::Message* message);
// Reads a .binaryproto (a BlobProto) into `blob`, reshaped to it; errors name the file.
void ReadBlobFromBinaryFile(const std::string& path, Blob* blob);
// Written atomically: to a temporary name beside `path`, fsync, rename.
void WriteBinaryProto(const google::protobuf::Message& message, const std::string& path);
void WriteTextProto(const google::protobuf::Message& message, const std::string& path);

// Reads a net prototxt and upgrades legacy formats (V0/V1 layers, input fields, data transforms).
std::shared_ptr<ProtoSource> ReadNetParamsFromTextFile(const std::string& path,
                                                       NetParameter* param);
// Reads a .caffemodel (binary) and upgrades it.
void ReadNetParamsFromBinaryFile(const std::string& path, NetParameter* param);
std::shared_ptr<ProtoSource> ReadSolverParamsFromTextFile(const std::string& path,
                                                          SolverParameter* param);

// Writes a file atomically: `write` fills a temporary path, which is then fsynced and renamed.
void WriteFileAtomically(const std::string& path, const std::string& contents);
// Finishes an atomic write that a library made to `temp` (beside `path`): fsyncs it and renames
// it onto `path`; the temporary is removed on failure.
void CommitFileAtomically(const std::string& temp, const std::string& path);

}  // namespace crema
