#!/bin/bash
# SPDX-License-Identifier: MIT
# The D-Bus interface files installed under $(datadir)/dbus-1/interfaces/
# (dbus/org.membroker1.Manager.xml, dbus/org.membroker1.Tenant.xml) are what
# the running daemon introspects: every method, argument, property, signal
# and annotation, in order.  A change of the API that leaves them behind
# fails here (the diff says what changed).  To refresh them after a
# deliberate change: make check TESTS=tests/test-bus-interfaces-xml.sh
# MB_XML_OUT=$PWD/../dbus (the files are written there, then compared).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/bus-lib.sh"

bus_setup "Capacity=64M"
mb_write_tenant cache "Path=db/cache"
bus_run

# extract XML IFACE OUT : the <interface name="IFACE"> element of XML as
# the file under dbus/ holds it (the standard doctype, a <node> around it).
extract() {
        python3 - "$1" "$2" "$3" <<'PY'
import sys, xml.dom.minidom
src, iface, out = sys.argv[1:]
doc = xml.dom.minidom.parse(src)
for el in doc.getElementsByTagName("interface"):
    if el.getAttribute("name") == iface:
        break
else:
    sys.exit("no interface " + iface)
def strip(node):
    for c in list(node.childNodes):
        if c.nodeType == c.TEXT_NODE and not c.data.strip() or c.nodeType == c.COMMENT_NODE:
            node.removeChild(c)
        else:
            strip(c)
strip(el)
body = el.toprettyxml(indent="  ").strip()
with open(out, "w") as f:
    f.write('<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"\n'
            ' "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">\n<node>\n')
    f.write("\n".join("  " + l for l in body.split("\n")) + "\n</node>\n")
PY
}

mb_busctl introspect --xml-interface "$BUS_DEST" "$BUS_MGR_PATH" >"$MB_TMP/manager-live.xml" ||
        fail "busctl introspect of the Manager"
mb_busctl introspect --xml-interface "$BUS_DEST" "$(tenant_object db/cache)" >"$MB_TMP/tenant-live.xml" ||
        fail "busctl introspect of a Tenant"
extract "$MB_TMP/manager-live.xml" org.membroker1.Manager "$MB_TMP/org.membroker1.Manager.xml"
extract "$MB_TMP/tenant-live.xml" org.membroker1.Tenant "$MB_TMP/org.membroker1.Tenant.xml"
for i in org.membroker1.Manager org.membroker1.Tenant; do
        [ -z "${MB_XML_OUT:-}" ] || cp "$MB_TMP/$i.xml" "$MB_XML_OUT/$i.xml"
        diff -u "$top_srcdir/dbus/$i.xml" "$MB_TMP/$i.xml" ||
                fail "dbus/$i.xml differs from the live introspection (above: - file, + daemon)"
        python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$top_srcdir/dbus/$i.xml" ||
                fail "dbus/$i.xml is not well-formed"
        pass "dbus/$i.xml matches the live introspection"
done
