#pragma once
// Skips for test cases whose subject is not in every build of crema.
#include <gtest/gtest.h>

// Image decoding (ImageData, WindowData, convert-imageset, classify) needs OpenCV
// (CMake -DCREMA_OPENCV; the GPU kit is built without it).
#ifdef CREMA_WITH_OPENCV
#define CREMA_SKIP_WITHOUT_OPENCV() static_assert(true, "")
#else
#define CREMA_SKIP_WITHOUT_OPENCV() GTEST_SKIP() << "crema was built without OpenCV"
#endif
