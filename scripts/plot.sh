#!/bin/sh
# plot.sh LOG [PNG] - HR@K, NDCG@K and training loss per epoch from an
# ncf-train --log file (one JSON object per line) into a PNG (default
# LOG.png), with gnuplot.  make plot runs it; make install puts it in
# PREFIX/bin as ncf-plot.  Where gnuplot is missing it says the apt-get
# line that installs it, and on a terminal offers to run that line; it
# never installs anything unasked.
set -eu
me=$(basename "$0")
[ "$me" = plot.sh ] && me=plot
if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
	echo "usage: $me LOG [PNG]   (LOG: ncf-train --log FILE; PNG default LOG.png)" >&2
	[ $# -ge 1 ] && { [ "$1" = -h ] || [ "$1" = --help ]; } && exit 0
	exit 2
fi
log=$1
png=${2:-$1.png}
if ! command -v gnuplot >/dev/null 2>&1; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo "
	line="${sudo}apt-get install gnuplot-nox"
	answer=n
	if [ -t 0 ] && [ -t 2 ]; then
		printf '%s: gnuplot is missing; install it now with "%s"? [y/N] ' "$me" "$line" >&2
		read -r answer || answer=n
	fi
	case $answer in
	y | Y | yes)
		$line || { echo "$me: $line failed" >&2; exit 1; } ;;
	*)
		echo "$me: gnuplot is missing; install it with: $line" >&2
		exit 1 ;;
	esac
fi
[ -s "$log" ] || { echo "$me: $log: no log lines (ncf-train --log FILE writes them)" >&2; exit 1; }
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
echo "$me: wrote $png" >&2
