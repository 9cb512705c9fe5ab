noinst_HEADERS += %reldir%/macros.h %reldir%/mb_stats_abi.h
