# Wire protocol: membroker.proto compiled by protoc-c at build time.
noinst_LTLIBRARIES += proto/libmbproto.la
proto_libmbproto_la_SOURCES = %reldir%/wire.c %reldir%/wire.h
nodist_proto_libmbproto_la_SOURCES = proto/membroker.pb-c.c proto/membroker.pb-c.h
proto_libmbproto_la_CFLAGS = $(AM_CFLAGS) $(PROTOBUF_C_CFLAGS) -fPIC
proto_libmbproto_la_LIBADD = $(PROTOBUF_C_LIBS)
BUILT_SOURCES += proto/membroker.pb-c.c proto/membroker.pb-c.h
CLEANFILES += proto/membroker.pb-c.c proto/membroker.pb-c.h
EXTRA_DIST += %reldir%/membroker.proto

proto/membroker.pb-c.c proto/membroker.pb-c.h: $(top_srcdir)/proto/membroker.proto
	$(AM_V_GEN)$(MKDIR_P) proto && \
	$(PROTOC_C) --proto_path=$(top_srcdir)/proto --c_out=proto $(top_srcdir)/proto/membroker.proto
