/* The channels-last lanes rows (pg_stream.h's pg_lanes_row, pg_lanes_row_f64), compiled on
 * their own: the build compiles this unit, pg_item.c and _kernels.c in parallel. */
#define PG_KERNEL_UNIT 1
#define PG_LANES_BODIES 1
#include "pg_stream.h"
