// akt_bench's main. This unit replaces the global operator new / delete to count allocations
// (bench_support.hpp): only this one, so that the program has one replacement.
#define AKT_BENCH_REPLACE_OPERATOR_NEW 1

#include <benchmark/benchmark.h>

#include "bench_support.hpp"

BENCHMARK_MAIN();
