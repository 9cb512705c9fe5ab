/* SPDX-License-Identifier: MIT */
#include "tenant.h"
