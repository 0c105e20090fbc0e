#pragma once
// Seeded random numbers. Each thread has its own mt19937 engine; SetRandomSeed reseeds the
// calling thread's engine and sets the seed that new threads derive theirs from. The cpu::Rng*
// draws (fillers, dropout, data layers) come from that engine.
#include <cstdint>
#include <random>
#include <string>

namespace crema {

using RngEngine = std::mt19937;

// Seeds the calling thread's generator; a negative seed picks one from the clock/entropy.
void SetRandomSeed(int64_t seed);
// The calling thread's generator.
RngEngine& ThreadRng();
// A fresh seed drawn from the calling thread's generator (for worker threads).
uint32_t NextSeed();

// An mt19937's state in the standard's text form, and back (for resuming data layers);
// RuntimeError when `state` is not such a text.
std::string EngineState(const std::mt19937& engine);
void SetEngineState(const std::string& state, std::mt19937* engine);

namespace cpu {

// n draws from the calling thread's generator, one after another (float and double).
template <typename T>
void RngUniform(int64_t n, T a, T b, T* r);  // [a, b], as Caffe
template <typename T>
void RngGaussian(int64_t n, T mean, T sigma, T* r);
template <typename T>
void RngBernoulli(int64_t n, T p, int* r);
void RngBernoulliUnsigned(int64_t n, double p, unsigned int* r);

}  // namespace cpu
}  // namespace crema
