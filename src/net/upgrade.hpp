#pragma once
// Upgrades of legacy Caffe formats, as Caffe's upgrade_proto does: V0 (layers with a nested
// `layer`) -> V1 (`layers` with enum types) -> V2 (`layer` with string types); padding layers
// folded into convolutions; data transformation fields moved into transform_param; the
// deprecated `input`/`input_dim`/`input_shape` fields turned into an Input layer; BatchNorm's
// obsolete param specs removed; solver_type enums turned into the `type` string.
#include <string>
#include <vector>

#include "crema/proto.hpp"

namespace crema {

bool NetNeedsUpgrade(const NetParameter& param);
// Upgrades in place; returns true when something changed. `source` names the file in messages;
// ConfigError for a net that cannot be upgraded. Each upgrade done is appended to `steps` when
// given; otherwise one log line says what was upgraded (a warning for deprecated formats).
bool UpgradeNetAsNeeded(const std::string& source, NetParameter* param,
                        std::vector<std::string>* steps = nullptr);

bool NetNeedsV0ToV1Upgrade(const NetParameter& param);
bool NetNeedsV1ToV2Upgrade(const NetParameter& param);
bool NetNeedsDataUpgrade(const NetParameter& param);
bool NetNeedsInputUpgrade(const NetParameter& param);
bool NetNeedsBatchNormUpgrade(const NetParameter& param);
void UpgradeV0Net(const NetParameter& v0_param, NetParameter* v1_param);
void UpgradeV1Net(const NetParameter& v1_param, NetParameter* v2_param);
void UpgradeNetDataTransformation(NetParameter* param);
void UpgradeNetInput(NetParameter* param);
void UpgradeNetBatchNorm(NetParameter* param);
// The V2 type string of a V1 LayerType enum ("" for NONE).
const char* UpgradeV1LayerType(V1LayerParameter::LayerType type);

bool SolverNeedsTypeUpgrade(const SolverParameter& param);
bool UpgradeSolverAsNeeded(const std::string& source, SolverParameter* param,
                           std::vector<std::string>* steps = nullptr);
// Caffe's rule for a solver read from `solver_file`: no snapshot_prefix means the solver file's
// path without its extension; a prefix naming an existing folder means that folder plus the
// solver file's stem.
void UpgradeSnapshotPrefix(const std::string& solver_file, SolverParameter* param);

}  // namespace crema
