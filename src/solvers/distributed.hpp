#pragma once
// Data-parallel training across processes (MPI, `mpirun -np N crema train`): one replica of the
// net per rank; gradients averaged with MPI_Allreduce before every update; rank 0's weights and
// decisions (stop, learning-rate scale) broadcast to the others. Built when CMake finds MPI
// (CREMA_MPI=AUTO|ON|OFF, defines CREMA_WITH_MPI); without MPI, or when the process was not
// started by an MPI launcher, the world is one rank and every call below is a no-op.
#include <cstdint>
#include <string>
#include <vector>

namespace crema {

class Blob;

namespace dist {

// Joins the MPI job when the process was started by an MPI launcher (mpirun, srun: detected by
// their environment variables); otherwise stays a world of one rank. Idempotent.
void Init();
// Leaves the MPI job (after a normal end); no-op when Init did not join one.
void Finalize();
int Rank();       // 0 without MPI
int WorldSize();  // 1 without MPI
inline bool IsRoot() { return Rank() == 0; }
inline bool Active() { return WorldSize() > 1; }

// Sums each blob's diff over the ranks and scales it by 1 / WorldSize(), in buckets of about
// `bucket_bytes` of the blobs flattened in order (float and double blobs in separate buckets).
void AverageDiffs(const std::vector<Blob*>& blobs, size_t bucket_bytes = 25u << 20);
// Overwrites each blob's data with rank 0's.
void BroadcastData(const std::vector<Blob*>& blobs);
// Rank 0's values of `values` on every rank.
void Broadcast(std::vector<double>* values);
// The mean over the ranks of `value`.
double Mean(double value);
// Ends every rank of the job with `message` (MPI_Abort), so the others do not wait forever for
// a rank that failed; returns only when the world is one rank.
void AbortJob(const std::string& message);

}  // namespace dist
}  // namespace crema
