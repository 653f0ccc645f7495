/* OpenMP queries that still compile, and answer "one thread", in a build without OpenMP. */
#ifndef PG_OMP_H
#define PG_OMP_H

#ifdef _OPENMP
#include <omp.h>
#define PG_OPENMP 1
#define PG_OPENMP_VERSION _OPENMP
static inline int pg_omp_max_threads(void) { return omp_get_max_threads(); }
#else
#define PG_OPENMP 0
#define PG_OPENMP_VERSION 0
static inline int pg_omp_max_threads(void) { return 1; }
#endif

#endif
