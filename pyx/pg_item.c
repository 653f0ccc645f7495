/* The average-pool gradient's work items (pg_item.h), compiled on their own: the build
 * compiles this unit, pg_lanes.c and _kernels.c in parallel. */
#define PG_KERNEL_UNIT 1
#define PG_ITEM_BODIES 1
#include "pg_item.h"
