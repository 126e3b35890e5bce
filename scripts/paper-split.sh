#!/bin/sh
# paper-split.sh RATINGS OUT/NAME [NEGATIVES] [SEED] - a MovieLens CSV
# (userId,movieId,rating,timestamp, with its header) as the NCF paper's
# files: OUT/NAME.train.rating, OUT/NAME.test.rating (user<TAB>item<TAB>
# rating<TAB>timestamp) and OUT/NAME.test.negative ((user,item)<TAB>neg...),
# made the paper's way: users and items renumbered from 0 in order of
# first appearance, each user's latest rating (ties: the later row) its
# test rating, NEGATIVES (default 99) negatives per user drawn uniformly
# among the items the user never rated (awk's rand, seeded by SEED,
# default 1), without repeats.  ncf-prep --ncf-paper OUT/NAME reads them
# (ncf-prep(1), INPUT FORMATS).  A user with one rating only is left out,
# as the paper's files have none (it would have no training row).
set -eu
[ $# -ge 2 ] || { echo "usage: paper-split.sh RATINGS OUT/NAME [NEGATIVES] [SEED]" >&2; exit 2; }
in=$1 name=$2 neg=${3:-99} seed=${4:-1}
awk -F, -v name="$name" -v neg="$neg" -v seed="$seed" '
{ sub(/\r$/, "") }			# CRLF line ends: the CR is no part of the time
NR == 1 { next }			# the header
{
	u = $1; i = $2
	if (!(u in uid)) { uid[u] = nu++; order[uid[u]] = u }
	if (!(i in iid)) iid[i] = ni++
	k = uid[u]
	n[k]++
	row[k, n[k]] = iid[i] "\t" $3 "\t" $4
	ts[k, n[k]] = $4 + 0
	seen[k, iid[i]] = 1
}
END {
	srand(seed)
	tr = name ".train.rating"; te = name ".test.rating"; ng = name ".test.negative"
	printf "" > tr; printf "" > te; printf "" > ng
	out = 0
	for (k = 0; k < nu; k++) {
		if (n[k] < 2)
			continue
		last = 1		# the latest, the later row on a tie
		for (j = 2; j <= n[k]; j++)
			if (ts[k, j] >= ts[k, last])
				last = j
		for (j = 1; j <= n[k]; j++)
			if (j != last)
				print out "\t" row[k, j] > tr
		print out "\t" row[k, last] > te
		split(row[k, last], f, "\t")
		line = "(" out "," f[1] ")"
		if (ni - n[k] < neg) {
			print "paper-split.sh: user " order[k] " rated all but " ni - n[k] \
				" items: fewer than " neg " negatives to draw" > "/dev/stderr"
			exit 1
		}
		delete drawn
		for (d = 0; d < neg; ) {
			it = int(rand() * ni)
			if ((k, it) in seen || it in drawn)
				continue
			drawn[it] = 1
			line = line "\t" it
			d++
		}
		print line > ng
		out++
	}
}' "$in"
