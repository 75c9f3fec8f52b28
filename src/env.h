/* Every environment variable fattn reads is read in env.c; this is the list.
 * Each returns FATTN_OK with *is_set = 0 when the variable is unset or empty. */
#ifndef FATTN_ENV_H
#define FATTN_ENV_H

#include "backend.h"

/* FATTN_BACKEND=auto|cpu|cuda|opencl */
fattn_status fattn_env_backend(fattn_backend_kind *out, int *is_set, fattn_msg *msg);
/* FATTN_DEVICE=<non-negative index> */
fattn_status fattn_env_device(int *out, int *is_set, fattn_msg *msg);
/* FATTN_CPU_THREADS=<1..1024>; returns 0 when unset (use every core). An
 * invalid value is reported through msg. */
fattn_status fattn_env_cpu_threads(int *out, fattn_msg *msg);
/* FATTN_MODULE_DIR: the absolute directory where GPU backend modules are
 * looked for first; NULL if unset. The registry checks it. */
const char *fattn_env_module_dir(void);

/* OpenCL settings (the core resolves them into fattn_settings):
 * FATTN_OPENCL_PLATFORM and FATTN_OPENCL_DEVICE: an index or a case-insensitive
 * name substring that filters platforms and devices; NULL if unset. */
const char *fattn_env_opencl_platform(void);
const char *fattn_env_opencl_device(void);
/* FATTN_CACHE_DIR: an absolute, private directory where compiled kernels
 * are cached on disk; "off" disables. The OpenCL module checks it. */
const char *fattn_env_cache_dir(void);
/* FATTN_KERNEL_DIR: load kernel sources from this directory instead of the
 * copies embedded at build time (for kernel development). */
const char *fattn_env_kernel_dir(void);
/* FATTN_OPENCL_TILES: tile overrides per head-dim bucket,
 * "DPAD:BQxBKV/TQxTK[,...]" (parsed by the OpenCL tuning code). */
const char *fattn_env_opencl_tiles(void);
/* FATTN_DECODE_TUNE: the split-KV decode paths' tuning constants for
 * sweeps, "name=value[,...]" (each backend documents its names); unset =
 * the measured defaults. */
const char *fattn_env_decode_tune(void);
const char *fattn_env_cpu_isa(void); /* FATTN_CPU_ISA: auto, amx, avx512, avx2, neon, portable */
/* FATTN_OPENCL_OPTIONS: extra OpenCL compiler options for every kernel build. */
const char *fattn_env_opencl_options(void);
/* FATTN_OPENCL_MATRIX: the OpenCL matrix path, "auto" (unset), "off" (the
 * scalar kernel) or "emulate" (its plain-OpenCL emulation, for tests);
 * settings.c checks the value. */
const char *fattn_env_opencl_matrix(void);
/* FATTN_OPENCL_MATRIX_TUNE: the matrix kernel's tiles for sweeps,
 * "name=value[,...]" (names in settings.c); unset = the table's. */
const char *fattn_env_opencl_matrix_tune(void);
/* CUDA settings:
 * FATTN_CUDA_SMALL_TILES=1: the CUDA-core kernel's small-shared-memory tiles
 * on any GPU (tests that path); 1 if set to "1", else 0. */
int fattn_env_cuda_small_tiles(void);
/* FATTN_CUDA_KERNEL: the CUDA f16/bf16 prefill kernel, "auto" (unset: for
 * now mma.sync), "wgmma" (the Hopper kernel, compute 9.0; problems it does
 * not take are declined) or "mma"; settings.c checks the value. */
const char *fattn_env_cuda_kernel(void);
/* HOME and XDG_CACHE_HOME, for the default cache directory. */
const char *fattn_env_home(void);
const char *fattn_env_xdg_cache(void);

#endif /* FATTN_ENV_H */
