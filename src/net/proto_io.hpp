#pragma once
// The prototxt and binary proto readers and writers are public API (installed headers).
#include "crema/proto_io.hpp"
