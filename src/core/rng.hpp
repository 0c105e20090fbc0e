#pragma once
// Seeded random numbers. Each thread has its own mt19937 engine; SetRandomSeed reseeds the
// calling thread's engine and sets the seed that new threads derive theirs from.
#include <cstdint>
#include <random>

namespace crema {

using RngEngine = std::mt19937;

// Seeds the calling thread's generator; a negative seed picks one from the clock/entropy.
void SetRandomSeed(int64_t seed);
// The calling thread's generator.
RngEngine& ThreadRng();
// A fresh seed drawn from the calling thread's generator (for worker threads).
uint32_t NextSeed();

}  // namespace crema
