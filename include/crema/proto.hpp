#pragma once
// The generated schema (proto/crema.proto), wire- and text-compatible with Caffe's caffe.proto.
#include "crema.pb.h"
