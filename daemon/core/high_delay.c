/* SPDX-License-Identifier: MIT */
#include "high_delay.h"
