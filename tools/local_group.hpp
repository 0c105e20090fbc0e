#pragma once
// `crema train --gpu 0,1 | --gpu all | --nproc N`: data-parallel training on one machine without
// an external launcher. The command starts one copy of itself per GPU (or N for --nproc) as a
// torchrun-style TCP group on 127.0.0.1 (solvers/distributed.hpp: RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT), each rank on the GPU its local rank picks from the --gpu list;
// gradients go through NCCL on GPUs and the TCP transport on the CPU. The batch size is per
// process (per GPU), as Caffe's multi-GPU training.

namespace crema::cli {

// Starts the group when the flags ask for more than one process and this process is not a rank
// already (no RANK/WORLD_SIZE, no MPI launcher); waits for every rank and returns true with the
// group's exit code (the first failing rank's; a rank that stops before the others makes them
// stop). Returns false when there is nothing to start. ConfigError for flags that disagree.
bool RunLocalGroup(int* exit_code);

}  // namespace crema::cli
