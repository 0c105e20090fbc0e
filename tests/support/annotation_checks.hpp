#pragma once
// Checks of AnnotatedDatum contents shared by the annotation tests (io/annotation_files,
// convert-annoset).
#include <gtest/gtest.h>

#include "crema/proto.hpp"

namespace crema::testing {

// One annotation: its instance id, normalized box and difficult flag.
inline void ExpectBox(const Annotation& a, int instance_id, float xmin, float ymin, float xmax,
                      float ymax, bool difficult) {
  EXPECT_EQ(a.instance_id(), instance_id);
  EXPECT_FLOAT_EQ(a.bbox().xmin(), xmin);
  EXPECT_FLOAT_EQ(a.bbox().ymin(), ymin);
  EXPECT_FLOAT_EQ(a.bbox().xmax(), xmax);
  EXPECT_FLOAT_EQ(a.bbox().ymax(), ymax);
  EXPECT_EQ(a.bbox().difficult(), difficult);
}

}  // namespace crema::testing
