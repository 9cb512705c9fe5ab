/* SPDX-License-Identifier: MIT */
#include "rstat.h"
