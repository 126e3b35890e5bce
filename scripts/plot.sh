#!/bin/sh
# plot.sh LOG PNG - HR@10, NDCG@10 and training loss per epoch from an
# ncf-train --log file (one JSON object per line) into a PNG, with gnuplot
# (installed from Debian when missing and we may).
set -eu
log=$1
png=$2
if ! command -v gnuplot >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ]; then
		echo "plot: installing gnuplot-nox" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >/dev/null 2>&1 ||
			{ apt-get update -q >/dev/null 2>&1 &&
			  DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >/dev/null 2>&1; } ||
			{ echo "plot: could not install gnuplot; run: apt-get install gnuplot-nox" >&2; exit 1; }
	else
		echo "plot: gnuplot is missing; run: apt-get install gnuplot-nox" >&2
		exit 1
	fi
fi
[ -s "$log" ] || { echo "plot: $log: no log lines (ncf-train --log FILE writes them)" >&2; exit 1; }
data=$(mktemp "${TMPDIR:-/tmp}/ncf-plot.XXXXXX")
trap 'rm -f "$data"' EXIT
# epoch, train_loss, hr@K, ndcg@K from each JSON line (keys in any order)
sed -e 's/[{}"]//g' -e 's/, */\n/g' "$log" | awk -F': *' '
	$1 == "epoch" { if (e != "") print e, l, h, n; e = $2 }
	$1 == "train_loss" { l = $2 }
	$1 ~ /^hr@/ { h = $2; k = substr($1, 4) }
	$1 ~ /^ndcg@/ { n = $2 }
	END { if (e != "") print e, l, h, n }' >"$data"
k=$(sed -n 's/.*"hr@\([0-9]*\)".*/\1/p' "$log" | head -n 1)
epochs=$(wc -l <"$data")
xtics="set xtics autofreq"
[ "$epochs" -le 30 ] && xtics="set xtics 1"
gnuplot <<GP
set terminal pngcairo size 900,520 noenhanced
set output "$png"
set title "ncf-train: $log"
set xlabel "epoch"
set ylabel "HR@$k, NDCG@$k"
set y2label "training loss"
set ytics nomirror
set y2tics
set key bottom right
set grid
$xtics
plot "$data" using 1:3 with linespoints title "HR@$k", \
     "$data" using 1:4 with linespoints title "NDCG@$k", \
     "$data" using 1:2 axes x1y2 with linespoints title "loss"
GP
echo "plot: wrote $png" >&2
