/* SPDX-License-Identifier: MIT */
#include "protection.h"
