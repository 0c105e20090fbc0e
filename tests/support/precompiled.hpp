// Precompiled once, after cmake/precompiled.hpp, in crema_test_support and reused by every test
// executable (tests/CMakeLists.txt, -DCREMA_PCH=ON). Only headers outside the checkout (no
// crema/*.hpp: see cmake/precompiled.hpp) and outside namespace crema::testing, so that a test
// that does not include the shared harness keeps `testing::` meaning gtest's. Test files still
// include what they use.
#include <gtest/gtest.h>
