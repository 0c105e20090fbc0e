#pragma once
// Debian's OpenBLAS 0.3.21 does not recognise recent Xeons and falls back to generic SSE3
// kernels (2-6x slower). OpenBLAS picks its kernels when the library loads, so the fix is to
// set OPENBLAS_CORETYPE and start again; the CLI does that (CREMA_OPENBLAS_FIX=0 opts out).
#include <string>

namespace crema {

// The core type OpenBLAS reports it is using ("Prescott", "SkylakeX", ...).
std::string OpenBlasCoreName();
// The OPENBLAS_CORETYPE that would select better kernels for this CPU than the ones OpenBLAS
// chose, or "" when OpenBLAS chose well (or the user set OPENBLAS_CORETYPE already).
std::string BetterOpenBlasCoreType();
// Sets the number of BLAS threads (0 = leave OpenBLAS's default).
void SetBlasThreads(int threads);
// Sets the threads of crema's OpenMP loops and of OpenBLAS together (threads > 0).
void SetCpuThreads(int threads);
// The threads a parallel region of crema uses now (OpenMP's max threads; 1 without OpenMP).
int CpuThreads();
// The threads OpenBLAS uses now.
int BlasThreads();

}  // namespace crema
