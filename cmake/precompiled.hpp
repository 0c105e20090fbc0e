// Precompiled once per target for the C++ sources of libcrema's modules and the crema CLI
// (target_precompile_headers, -DCREMA_PCH=ON, the default): the standard, glog and protobuf
// headers nearly every source includes, and crema.pb.h (about 50,000 lines) with them, are
// parsed once per target instead of once per file. Sources still include what they use; a
// -DCREMA_PCH=OFF build checks that.
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

// The generated schema: include guards, not #pragma once. No crema/*.hpp here: ccache (relative
// paths, CCACHE_BASEDIR) hands one checkout's precompiled header to a clone elsewhere, and a
// #pragma once header recorded under the other checkout's path would be read a second time.
#include "crema.pb.h"
