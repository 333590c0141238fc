/*
 * neuron/neuron-utils.hpp -- the multicore API of docs/kernel-api.md ("Headers a
 * kernel includes").  Values come from the core binding (abi.h
 * gpsimd_core_binding.core_id / core_count).
 */
#ifndef GPSIMD_NEURON_NEURON_UTILS_HPP
#define GPSIMD_NEURON_NEURON_UTILS_HPP

#include <stdint.h>

/* This core's index, 0 .. get_cpu_count()-1. */
uint32_t get_cpu_id();
/* 8 for a multicore library, 1 for a single-core one. */
uint32_t get_cpu_count();

#endif  // GPSIMD_NEURON_NEURON_UTILS_HPP
