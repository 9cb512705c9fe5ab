#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/charts.sh - draw the tables of a benchmark run as PNG charts.
#
#   charts.sh RESULTS.md OUTDIR
#
# Every table of RESULTS.md (the Markdown mb-bench.sh writes) with a
# "(median)" column becomes OUTDIR/table-N.png: one horizontal bar per row,
# its median, with the min–max range as an error bar when the next column
# holds it (a logarithmic axis when the figures span more than 50×).  A
# table whose first column is a number and whose cells read "median
# (min–max)" (table 11: tenants, then start-up and Reload() times) becomes
# a line chart, one line per column: how the figure scales; so does a
# table of plain figures over a numeric first column (table 14: a time
# series), its headings naming the units, columns headed "(%)" on the
# right-hand axis, columns without figures left out.  Needs gnuplot
# (Debian: gnuplot-nox); without it, says so and draws nothing.  Prints the
# charts it wrote, one a line.
set -uo pipefail

results=$1
outdir=$2
GNUPLOT=${GNUPLOT:-gnuplot}

if ! command -v "$GNUPLOT" >/dev/null; then
        echo "charts: gnuplot is not installed (Debian: apt-get install gnuplot-nox): no PNG charts" >&2
        exit 0
fi
[ -r "$results" ] || { echo "charts: cannot read $results" >&2; exit 1; }
mkdir -p "$outdir"

terminal=png
"$GNUPLOT" -e 'set terminal pngcairo' >/dev/null 2>&1 && terminal=pngcairo

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Split the tables: $work/N.title, $work/N.kind ("bars" or "lines"),
# $work/N.unit and $work/N.dat (tab-separated rows).
awk -v dir="$work" '
function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
function num(s) { s = trim(s); gsub(/,/, "", s); if (match(s, /^[0-9]+(\.[0-9]+)?/)) return substr(s, 1, RLENGTH) + 0; return "" }
function range(s, which,   a) {
        s = trim(s); gsub(/,/, "", s)
        if (!match(s, /[0-9.]+–[0-9.]+/)) return ""
        split(substr(s, RSTART, RLENGTH), a, "–")
        return a[which] + 0
}
function flush(   f) {
        if (id == "" || nrows == 0) { id = ""; return }
        f = dir "/" id
        print title > (f ".title"); close(f ".title")
        print kind > (f ".kind"); close(f ".kind")
        print unit > (f ".unit"); close(f ".unit")
        close(f ".dat")
        id = ""
}
/^## Table / {
        flush()
        title = substr($0, 4)
        id = $3; sub(/:$/, "", id)
        state = "title"; nrows = 0; kind = ""
        next
}
id == "" { next }
state == "title" && /^\|/ {
        n = split($0, h, "|")
        mcol = 0; rcol = 0; kind = ""
        for (i = 2; i < n; i++) {
                hc = trim(h[i])
                if (!mcol && hc ~ /\(median\)/) { mcol = i; unit = hc; sub(/ *\(median\)/, "", unit) }
        }
        if (mcol && mcol + 1 < n && trim(h[mcol + 1]) == "min–max") rcol = mcol + 1
        if (mcol) kind = "bars"
        else { kind = "lines"; unit = "ms (median)"; ncols = n; for (i = 2; i < n; i++) head[i] = trim(h[i]) }
        state = "sep"; next
}
state == "sep" { state = "rows"; next }
state == "rows" && /^\|/ {
        n = split($0, c, "|")
        if (kind == "bars") {
                v = num(c[mcol])
                if (v == "") next
                lo = rcol ? range(c[rcol], 1) : ""; hi = rcol ? range(c[rcol], 2) : ""
                if (lo == "") { lo = v; hi = v }
                label = trim(c[2]); gsub(/"/, "", label)
                if (length(label) > 72) label = substr(label, 1, 70) "..."
                printf "%s\t%s\t%s\t%s\n", label, v, lo, hi > (dir "/" id ".dat")
        } else {
                x = num(c[2])
                if (x == "" || trim(c[2]) !~ /^[0-9,]+$/) { id = ""; next }
                line = x
                for (i = 3; i < ncols; i++) {
                        v = num(c[i]); line = line "\t" (v == "" ? "NaN" : v)
                        # plain figures (no "median (min–max)"): the
                        # headings carry the units
                        if (v != "" && c[i] !~ /–/) unit = ""
                }
                print line > (dir "/" id ".dat")
                if (nrows == 0) {
                        hdr = ""
                        for (i = 3; i < ncols; i++) hdr = hdr (i > 3 ? "\t" : "") head[i]
                        print hdr > (dir "/" id ".series"); close(dir "/" id ".series")
                        print head[2] > (dir "/" id ".xlabel"); close(dir "/" id ".xlabel")
                }
        }
        nrows++
        next
}
state == "rows" { state = "done"; next }
END { flush() }
' "$results"

for dat in "$work"/*.dat; do
        [ -e "$dat" ] || continue
        id=$(basename "$dat" .dat)
        title=$(cat "$work/$id.title")
        kind=$(cat "$work/$id.kind")
        unit=$(cat "$work/$id.unit")
        png="$outdir/table-$id.png"
        rows=$(wc -l <"$dat")
        esc_title=${title//\"/\\\"}
        if [ "$kind" = bars ]; then
                read -r lo hi < <(awk -F'\t' 'NR == 1 { lo = $3; hi = $4 } { if ($3 < lo) lo = $3; if ($4 > hi) hi = $4 } END { print lo, hi }' "$dat")
                log=$(awk -v lo="$lo" -v hi="$hi" 'BEGIN { print (lo > 0 && hi / lo > 50) ? 1 : 0 }')
                base=0
                [ "$log" = 1 ] && base=$(awk -v lo="$lo" 'BEGIN { print lo / 2 }')
                height=$((140 + 26 * rows))
                "$GNUPLOT" <<GP || { echo "charts: gnuplot failed on table $id" >&2; continue; }
set terminal $terminal size 1200,$height font ",10"
set output "$png"
set datafile separator "\t"
set title "$esc_title" noenhanced
set xlabel "$unit (median; bars: min–max)" noenhanced
set yrange [$rows - 0.4:-0.6]
set ytics nomirror noenhanced
set grid xtics
set key off
set style fill solid 0.6 border -1
set lmargin 62
$( [ "$log" = 1 ] && echo "set logscale x" )
$( [ "$log" = 1 ] && echo "set xrange [$base:*]" || echo "set xrange [0:*]" )
plot "$dat" using ($base):0:($base):2:(\$0 - 0.35):(\$0 + 0.35):yticlabels(1) with boxxyerror lc rgb "#4a7ab5", \
     "$dat" using 2:0:3:4 with xerrorbars pt -1 lc rgb "#202020"
GP
        else
                series=$(cat "$work/$id.series")
                xlabel=$(cat "$work/$id.xlabel")
                IFS=$'\t' read -r -a names <<<"$series"
                plots= y2=
                for ((i = 0; i < ${#names[@]}; i++)); do
                        # a column without a figure (a state name) is no series
                        awk -F'\t' -v c=$((i + 2)) '$c != "NaN" { found = 1 } END { exit !found }' "$dat" || continue
                        # percentages on the right-hand axis
                        axes=x1y1
                        case ${names[$i]} in *"(%)") axes=x1y2 y2=1 ;; esac
                        plots+="${plots:+, }\"$dat\" using 1:$((i + 2)) axes $axes with linespoints lw 2 title \"${names[$i]//\"/}\""
                done
                "$GNUPLOT" <<GP || { echo "charts: gnuplot failed on table $id" >&2; continue; }
set terminal $terminal size 1000,520 font ",10"
set output "$png"
set datafile separator "\t"
set title "$esc_title" noenhanced
set xlabel "${xlabel//\"/}" noenhanced
set ylabel "$unit" noenhanced
set grid
set key top right noenhanced
set xrange [0:*]
set yrange [0:*]
$( [ -n "$y2" ] && printf 'set y2label "%%"\nset y2tics\nset y2range [0:*]\nset ytics nomirror' )
plot $plots
GP
        fi
        echo "$png"
done
