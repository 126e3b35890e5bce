#!/bin/sh
# ml-20m.sh BIN - make ml-20m: download MovieLens 20M from GroupLens (needs
# internet), check its MD5 against GroupLens's published value, unpack the
# ratings and prepare data/ml-20m.ncfc with NVIDIA's protocol.
# The data are GroupLens's, under their license (see README.md).
set -eu
BIN=${1:-build/bin}
URL=https://files.grouplens.org/datasets/movielens/ml-20m.zip
MD5=cd245b17a1ae2cc31bb14903e1204af3
mkdir -p data
cd data
if [ ! -f ml-20m.zip ]; then
	echo "ml-20m: downloading $URL (190 MB)" >&2
	if command -v curl >/dev/null 2>&1; then
		curl -fL --retry 3 -o ml-20m.zip.part "$URL"
	else
		wget -O ml-20m.zip.part "$URL"
	fi
	mv ml-20m.zip.part ml-20m.zip
fi
got=$(md5sum ml-20m.zip | cut -d' ' -f1)
if [ "$got" != "$MD5" ]; then
	echo "ml-20m: ml-20m.zip has MD5 $got, GroupLens publishes $MD5; delete it and retry" >&2
	exit 1
fi
if [ ! -f ml-20m/ratings.csv ]; then
	command -v unzip >/dev/null 2>&1 || { echo "ml-20m: needs unzip (apt-get install unzip)" >&2; exit 1; }
	unzip -o -q ml-20m.zip ml-20m/ratings.csv
fi
"../$BIN/ncf-prep" -v -o ml-20m.ncfc ml-20m/ratings.csv
"../$BIN/ncf-prep" --info ml-20m.ncfc
echo "ml-20m: ready; train with: $BIN/ncf-train data/ml-20m.ncfc -o model.ncfm -t 0.9562" >&2
