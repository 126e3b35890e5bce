#!/usr/bin/env bash
# prep-errors.t - ncf-prep refuses bad input with `ncf-prep: FILE:LINE: ...`,
# exit status 1 and no output left behind; usage errors exit 2; --info
# refuses damaged caches with a hint to re-run ncf-prep.  Then the other
# input formats: ml-1m "::", ml-100k tabs and generic CSV headers give the
# same arrays as the equivalent ml-20m CSV, and the protocol's counters
# (--min-ratings, single ratings, duplicates, ties) show in --info.
. "$(dirname "$0")/../lib.sh"


H='userId,movieId,rating,timestamp'
mkdir "$T/in"
cd "$T" || bail "cannot cd to $T"

# body FILE: a cache's bytes after its meta section (the arrays).
body() {
	local comp
	comp=$(od -An -t u8 -j 48 -N 8 "$1" | tr -d ' ')
	tail -c +$((64 + comp + 1)) "$1"
}

# bad NAME CONTENT REGEX DESC: CONTENT (a printf format) as in/NAME must
# fail with exit 1, one line on stderr matching ^ncf-prep: in/NAME<REGEX>
# and equal to tests/expected/prep-errors/NAME.err (NAME without its
# extension), nothing on stdout and no file in the output directory
# (neither -o's target nor a .NAME.XXXXXX temporary).
bad() {
	local name=$1 content=$2 regex=$3 desc=$4 dir
	printf -- "$content" >"in/$name"
	dir=o.$_n
	mkdir "$dir"
	run ncf-prep -o "$dir/x.ncfc" "in/$name"
	is "$status" 1 "$desc: exit 1"
	if [ "$(wc -l <"$err")" = 1 ]; then
		like "$err" "^ncf-prep: in/$name$regex" "$desc: message"
	else
		like /dev/null x "$desc: exactly one line on stderr"
		sed 's/^/#   /' "$err"
	fi
	expect "prep-errors/${name%.*}.err" "$err" "$desc: the whole message"
	is "$(ls -A "$dir")$(cat "$out")" "" "$desc: no output left behind"
}

bad fields.csv "$H\n1,2,3.0,100\n1,3,4.0\n" ':3: 3 fields, expected 4$' "wrong field count"
bad fields5.csv "$H\n1,2,3.0,100,7\n" ':2: 5 fields, expected 4$' "too many fields"
# The wording of STYLE.md rule 9's example: "'abc' is not an item id".
bad item.csv "$H\n1,2,3.0,100\n1,abc,3.0,100\n" ":3: field 2: 'abc' is not an item id" "non-numeric item id"
bad empty-field.csv "$H\n1,,3.0,100\n" ':2: field 2: empty' "empty item id"
bad neguser.csv "$H\n1,2,3.0,100\n-1,2,3.0,100\n" ":3: field 1: '-1' is not a user id \\(negative\\)" "negative user id"
bad overflow.csv "$H\n1,2,3.0,100\n4294967296,2,3.0,100\n" \
	":3: field 1: '4294967296' is out of range for a user id \\(0 to 4294967295\\)" "overflowing user id"
bad itemover.csv "$H\n1,99999999999999999999,3.0,100\n" ":2: field 2: '99999999999999999999' is out of range" \
	"overflowing item id"
bad ts.csv "$H\n1,2,3.0,100\n1,3,3.0,12x\n" ":3: field 4: '12x' is not a timestamp" "bad timestamp"
bad tsfloat.csv "$H\n1,2,3.0,1.5\n" ":2: field 4: '1.5' is not a timestamp" "fractional timestamp"
bad tsbig.csv "$H\n1,2,3.0,9223372036854775808\n" ":2: field 4: '9223372036854775808' is out of range for a timestamp" \
	"timestamp past 2^63-1"
bad rating.csv "$H\n1,2,good,100\n" ":2: field 3: 'good' is not a rating" "non-numeric rating"
bad empty.csv "" ': empty input' "empty input"
bad header.csv "$H\n" ': no ratings after the header$' "header only"
bad header-nonl.csv "$H" ':1: no ratings after the header \(and no line end' "header only, no line end"
bad header2.csv "$H\n1,2,3.0,100\n$H\n1,3,3.0,100\n" ':3: a second header \(concatenated files\?\)$' \
	"a second header in the middle"
bad nul.csv "\000\001\002garbage\377\n" ': binary data \(NUL bytes\), not a ratings file$' "binary garbage (NUL bytes)"
# A NUL past the first 64 KiB (the format probe) is still caught, on its line.
{
	echo "$H"
	seq 1 6000 | awk '{ print $1 "," $1 ",4.0," 1000000 + $1 }'
} >"in/long.csv"
bad nul-late.csv "$(sed 's/%/%%/g' in/long.csv)\n1,2\0003,4.0,5\n" ':6002: a NUL byte in the line \(binary data, not text\)$' \
	"a NUL byte on line 6002"
bad trunc.csv "$H\n1,2,3.0,100\n1,3,4.0,1" ":3: last line has no line end \(truncated file\?\): '1,3,4.0,1'$" \
	"a truncated last line"
bad unknown.txt "hello world\n1 2 3\n" ":1: unknown format: 'hello world'" "an unknown format"
bad noitem.csv "user,rating,timestamp\n1,3,100\n" ":1: unknown format: the header 'user,rating,timestamp' does not name" \
	"a header without an item column"
bad twice.csv "user,item,user,timestamp\n1,2,1,100\n" ":1: column 'user' appears twice" "a header naming a column twice"
# An unterminated quote: the problem is on line 3, not at the end.
bad quote.csv "$H\n1,2,3.0,100\n1,\"3,3.0,100\n1,4,3.0,100\n1,5,3.0,100\n" ':3: ' "an unterminated quote on line 3"
bad stray-quote.csv "$H\n1,2\"x,3.0,100\n" ':2: malformed CSV: a quote inside a field that is not quoted' \
	"a stray quote: what RFC 4180 wants, not libcsv's words"
bad blank.csv "$H\n1,2,3.0,100\n\n\n1,x,3.0,100\n" ":5: field 2: 'x' is not an? item id" "line numbers count blank lines"
bad crlf.csv "$H\r\n1,2,3.0,100\r\n1,3,4.0\r\n" ':3: 3 fields, expected 4$' "CRLF file, wrong field count"
bad dat.dat "1::2::5::100\n1::3::5\n" ':2: 3 fields, expected 4$' "ml-1m, wrong field count"
bad dat-trunc.dat "1::2::5::100\n1::3" ":2: last line has no line end" "ml-1m, truncated last line"
bad tab.data "1\t2\t5\t100\n1\tx\t5\t100\n" ":2: field 2: 'x' is not an? item id" "ml-100k, non-numeric item id"
bad csv-ts.csv "user,item,timestamp\n1,2,100\n1,2,abc\n" ":3: field 3: 'abc' is not a timestamp" "generic CSV, bad timestamp"
# ml-20m's header or ml-100k's tabs over dates or ids that are text: the
# message names the options that read them (as a generic CSV).
bad ml20m-date.csv "$H\n1,2,3.0,2000-07-30T18:45:03Z\n" \
	":2: field 4: '2000-07-30T18:45:03Z' is not a timestamp \\(expected integer Unix seconds; dates are read with --columns user=userId,item=movieId,time=timestamp\\)$" \
	"ml-20m's header over dates"
bad tab-date.data "1\t2\t5\t2000-07-30 18:45:03\n" \
	":1: field 4: '2000-07-30 18:45:03' is not a timestamp \\(expected integer Unix seconds; dates are read with --delimiter tab --columns user=1,item=2,time=4\\)$" \
	"ml-100k's tabs over dates"
bad tab-text.data "1\tB00005JMJ8\t5\t100\n" ":1: field 2: 'B00005JMJ8' is not an item id .*; ids that are text are read with --delimiter tab" \
	"ml-100k's tabs over ids that are text"

# The same through stdin: the name is <stdin>.
printf '%s\n1,2,3.0,100\n1,x,3.0,100\n' "$H" | ncf-prep >"$T/stdin.out" 2>"$T/stdin.err"
is "$?" 1 "stdin: exit 1"
like "$T/stdin.err" "^ncf-prep: <stdin>:3: field 2: 'x' is not an? item id" "stdin: the message names <stdin> and the line"
is "$(wc -c <"$T/stdin.out" | tr -d ' ')" 0 "stdin: nothing on stdout"

# A failed run leaves an existing -o target alone.
echo OLD >"$T/keep.ncfc"
run ncf-prep -o "$T/keep.ncfc" "$T/in/item.csv"
is "$status:$(cat "$T/keep.ncfc")" "1:OLD" "a failed run leaves the existing output untouched"
# --min-ratings that leaves nobody.
run ncf-prep -o "$T/none.ncfc" --min-ratings 5 "$T/in/long.csv"
is "$status" 1 "--min-ratings above every user: exit 1"
like "$err" 'no user has 5 or more ratings' "--min-ratings above every user: message"
# An output directory that does not exist.
printf '%s\n1,2,3.0,100\n' "$H" >"$T/in/one.csv"
run ncf-prep -o "$T/no/such/dir/x.ncfc" "$T/in/one.csv"
is "$status" 1 "missing output directory: exit 1"
like "$err" "^ncf-prep: $T/no/such/dir/x.ncfc: cannot create" "missing output directory: message"
run ncf-prep -o "$T/o.x" "$T/in/missing.csv"
is "$status" 1 "missing input file: exit 1"
like "$err" "^ncf-prep: $T/in/missing.csv: No such file" "missing input file: message"

# Usage errors: exit 2, one line naming the problem, then the synopsis;
# the whole of stderr equals tests/expected/prep-errors/usage-NAME.err.
usage() {
	local name=$1 regex=$2 desc=$3
	shift 3
	run ncf-prep "$@"
	is "$status" 2 "$desc: exit 2"
	like "$err" "^ncf-prep: $regex" "$desc: message"
	like "$err" '^usage: ncf-prep' "$desc: synopsis"
	expect "prep-errors/usage-$name.err" "$err" "$desc: the whole message"
}
usage bogus "unknown option '--bogus'" "unknown option" --bogus in/one.csv
usage eval-negatives "--eval-negatives: '0' is not an integer from 1 to 100000" "--eval-negatives 0" \
	--eval-negatives 0 in/one.csv
usage synthetic "--synthetic: 'bogus' is not SHAPE" "--synthetic bogus" --synthetic bogus
usage synthetic-scale "--synthetic: 'tinyx0' is not SHAPE" "--synthetic tinyx0" --synthetic tinyx0
usage format "--format: unknown format 'xml'" "--format xml" --format xml in/one.csv
usage seed "--seed: 'abc'" "--seed abc" --seed abc in/one.csv
usage two-inputs "one input file at most" "two input files" in/one.csv in/one.csv
usage emit-csv "--emit-csv needs --synthetic" "--emit-csv alone" --emit-csv
usage o-value "option '-o' needs a value" "-o without a value" -o
run ncf-prep --help
is "$status:$(wc -c <"$err" | tr -d ' ')" "0:0" "--help exits 0, nothing on stderr"
like "$out" '^usage: ncf-prep' "--help prints the usage on stdout"

# --info on damaged caches.
ncf-prep -q -o "$T/good.ncfc" "$T/in/long.csv"
size=$(wc -c <"$T/good.ncfc" | tr -d ' ')
head -c $((size / 2)) "$T/good.ncfc" >"$T/trunc.ncfc"
# flip FILE OFFSET: invert every bit of one byte
flip() {
	local b
	b=$(od -An -t u1 -j "$2" -N 1 "$1" | tr -d ' ')
	printf "$(printf '\\%03o' $((b ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
cp "$T/good.ncfc" "$T/flip-hdr.ncfc" && flip "$T/flip-hdr.ncfc" 40
cp "$T/good.ncfc" "$T/flip-data.ncfc" && flip "$T/flip-data.ncfc" $((size - 100))
: >"$T/empty.ncfc"
for f in trunc flip-hdr flip-data empty; do
	run ncf-prep --info "$f.ncfc"
	is "$status:$(wc -c <"$out" | tr -d ' ')" "1:0" "--info on a $f cache: exit 1, nothing on stdout"
	like "$err" "^ncf-prep: $f.ncfc: .*re-run ncf-prep" "--info on a $f cache: says re-run ncf-prep"
	expect "prep-errors/info-$f.err" "$err" "--info on a $f cache: the whole message"
done
run ncf-prep --info in/long.csv
is "$status" 1 "--info on a CSV file: exit 1"
like "$err" "^ncf-prep: --info: in/long.csv is a text file \\(ratings\\?\\), not a cache: make one first: ncf-prep -o long.ncfc in/long.csv" \
	"--info on a CSV file: what it is, and the command that makes the cache"
expect prep-errors/info-csv.err "$err" "--info on a CSV file: the whole message"
run ncf-prep --info - <"$T/good.ncfc"
is "$status:$(grep -c . "$out")" "0:$(ncf-prep --info "$T/good.ncfc" | grep -c .)" "--info - reads stdin"

# Good inputs in the other formats give the same arrays as the ml-20m CSV
# of the same ratings (meta differs: format, source size and CRC).
R='1,10,4.0,100\n1,20,3.5,300\n2,10,5.0,200\n1,30,1.0,200\n2,40,2.0,150\n3,30,4.0,50\n3,10,4.0,60\n'
printf "$H\n$R" >"$T/in/ref.csv"
ncf-prep -q -o "$T/ref.ncfc" "$T/in/ref.csv"
is "$(info users "$T/ref.ncfc"):$(info items "$T/ref.ncfc"):$(info train_positives "$T/ref.ncfc")" 3:4:4 \
	"ml-20m reference: 3 users, 4 items, 4 training positives"
# same_as NAME CONTENT FORMAT DESC
same_as() {
	printf -- "$2" >"$T/in/$1"
	run ncf-prep -o "$T/$1.ncfc" "$T/in/$1"
	is "$status" 0 "$4: exit 0"
	is "$(info format "$T/$1.ncfc")" "$3" "$4: detected as $3"
	cmp -s <(body "$T/ref.ncfc") <(body "$T/$1.ncfc")
	ok $? "$4: the same arrays as the ml-20m CSV"
}
same_as ml1m.dat "$(printf "$R" | sed 's/,/::/g')\n" ml-1m "ml-1m '::' file"
same_as ml100k.data "$(printf "$R" | tr ',' '\t')\n" ml-100k "ml-100k tab file"
same_as generic.csv "user,item,timestamp\n$(printf "$R" | cut -d, -f1,2,4)\n" csv "generic CSV user,item,timestamp"
same_as reordered.csv "Timestamp,Rating,Item_Id,User_Id\n$(printf "$R" | awk -F, '{ print $4 "," $3 "," $2 "," $1 }')\n" \
	csv "generic CSV with columns in another order"
same_as extra.csv "user,tag,item,timestamp,rating\n$(printf "$R" | awk -F, '{ print $1 ",x," $2 "," $4 "," $3 }')\n" \
	csv "generic CSV with an ignored column"
same_as crlf.dat "$(printf "$R" | sed 's/,/::/g; s/$/\r/')\n" ml-1m "ml-1m with CRLF"
printf "$(printf "$R" | sed 's/,/::/g')\n" >"$T/in/forced.txt"
run ncf-prep --format ml-1m -o "$T/forced.ncfc" "$T/in/forced.txt"
cmp -s <(body "$T/ref.ncfc") <(body "$T/forced.ncfc")
ok $? "--format ml-1m reads a .txt the same"

# Protocol counters.
# --min-ratings 2: user 4 has one rating, of an item nobody else rated.
printf "$H\n${R}4,50,3.0,10\n" >"$T/in/min.csv"
ncf-prep -q --min-ratings 2 -o "$T/min.ncfc" "$T/in/min.csv"
is "$(info users_dropped "$T/min.ncfc"):$(info items_dropped "$T/min.ncfc"):$(info ratings_dropped "$T/min.ncfc")" \
	1:1:1 "--min-ratings 2: users_dropped 1, items_dropped 1, ratings_dropped 1"
is "$(info min_ratings "$T/min.ncfc"):$(info users "$T/min.ncfc"):$(info items "$T/min.ncfc")" 2:3:4 \
	"--min-ratings 2: 3 users, 4 items left"
cmp -s <(body "$T/ref.ncfc") <(body "$T/min.ncfc")
ok $? "--min-ratings 2: the same arrays as without the dropped user"
# Without --min-ratings the single rating is a test-only user.
ncf-prep -q -o "$T/single.ncfc" "$T/in/min.csv"
is "$(info test_only_users "$T/single.ncfc"):$(info users "$T/single.ncfc"):$(info train_positives "$T/single.ncfc")" \
	1:4:4 "a user with a single rating: test_only_users 1, no training positive"
# --min-ratings counts distinct items: 2 rows of one item are one.
printf "$H\n${R}4,10,3.0,10\n4,10,3.0,20\n" >"$T/in/min2.csv"
ncf-prep -q --min-ratings 2 -o "$T/min2.ncfc" "$T/in/min2.csv"
# The repeat is counted as a duplicate, the one distinct rating as dropped:
# duplicates + dropped + kept = rows read.
is "$(info users_dropped "$T/min2.ncfc"):$(info ratings_dropped "$T/min2.ncfc"):$(info items_dropped "$T/min2.ncfc"):$(info duplicates_dropped "$T/min2.ncfc")" \
	1:1:0:1 "--min-ratings counts distinct items (two rows of one item are one)"
# Duplicates: the earliest by time is kept, even when it comes later in the
# file.  User 1's later repeat of item 10 would make 10 the test item; user
# 3's repeat of item 10 is earlier than the first one, which makes 30 the
# test item.
printf "$H\n1,10,4.0,100\n1,20,3.5,300\n1,10,3.0,400\n2,10,5.0,200\n1,30,1.0,200\n2,40,2.0,150\n3,30,4.0,50\n3,10,4.0,60\n3,10,2.0,40\n" \
	>"$T/in/dups.csv"
printf "$H\n1,10,4.0,100\n1,20,3.5,300\n2,10,5.0,200\n1,30,1.0,200\n2,40,2.0,150\n3,30,4.0,50\n3,10,2.0,40\n" \
	>"$T/in/dups-ref.csv"
ncf-prep -q -o "$T/dups.ncfc" "$T/in/dups.csv"
ncf-prep -q -o "$T/dups-ref.ncfc" "$T/in/dups-ref.csv"
is "$(info duplicates_dropped "$T/dups.ncfc"):$(info ratings_read "$T/dups.ncfc")" 2:9 \
	"duplicate (user, item) rows: duplicates_dropped 2 of 9"
cmp -s <(body "$T/dups-ref.ncfc") <(body "$T/dups.ncfc")
ok $? "duplicates: the earliest by time is kept (same arrays as the file without the others)"
# Ties: the later row wins.  User 1's latest two share a timestamp; with
# item 20 last in the file the split equals the reference's.
printf "$H\n1,10,4.0,100\n1,30,1.0,300\n2,10,5.0,200\n1,20,3.5,300\n2,40,2.0,150\n3,30,4.0,50\n3,10,4.0,60\n" \
	>"$T/in/ties.csv"
ncf-prep -q -o "$T/ties.ncfc" "$T/in/ties.csv"
is "$(info test_timestamp_ties "$T/ties.ncfc")" 1 "test_timestamp_ties 1"
# ref has items in first-appearance order 10 20 30 40; ties.csv has 10 30 20 40,
# so compare with a reference that has that order.
printf "$H\n1,10,4.0,100\n1,30,1.0,200\n2,10,5.0,200\n1,20,3.5,300\n2,40,2.0,150\n3,30,4.0,50\n3,10,4.0,60\n" \
	>"$T/in/ties-ref.csv"
ncf-prep -q -o "$T/ties-ref.ncfc" "$T/in/ties-ref.csv"
cmp -s <(body "$T/ties-ref.ncfc") <(body "$T/ties.ncfc")
ok $? "equal latest timestamps: the later row is the test item"
# Ids at the top of the range.
printf "$H\n4294967295,4294967295,3.0,9223372036854775807\n4294967295,0,3.0,0\n" >"$T/in/max.csv"
run ncf-prep -o "$T/max.ncfc" "$T/in/max.csv"
is "$status:$(info users "$T/max.ncfc"):$(info items "$T/max.ncfc")" 0:1:2 "ids 0 and 4294967295, timestamp 2^63-1 accepted"

done_testing
