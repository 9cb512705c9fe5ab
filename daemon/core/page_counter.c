/* SPDX-License-Identifier: MIT */
#include "page_counter.h"
