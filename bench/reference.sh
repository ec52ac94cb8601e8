#!/usr/bin/env bash
# The coreutils reference for the benchmark: the hourly step as an operator would
# write it with LC_ALL=C sort + join + mawk, without the project's extras (no WHATWG
# canonicalization, no XXH64 ids, no public-suffix domains: the URL itself is the key,
# lightly normalized; the domain is the host's last two labels).
#
#   bench/reference.sh REFLOG CURRENT_IN CURRENT_OUT FILTERED_OUT DOMAIN_MAP QUEUE_DIR NAME NOW TMPDIR
#
# current_log here is "url ts updatetag hits domain", sorted by url. DOMAIN_MAP
# ("domain yacobot") is read and new assignments appended (least-loaded of the
# Yacobots seen in the map, or 1..3 when it is empty). Queue files go to
# QUEUE_DIR/<yacobot>/NAME.tsv. When BENCH_TIMES names a file, each process of
# the pipeline appends "label elapsed maxrss_kb user sys" to it (/usr/bin/time).
set -euo pipefail
export LC_ALL=C
reflog=$1 cur_in=$2 cur_out=$3 filtered=$4 map=$5 qdir=$6 name=$7 now=$8 tmp=$9
[ -e "$cur_in" ] || : > "$cur_in"
[ -e "$map" ] || : > "$map"

T() {
  local label=$1; shift
  if [ -n "${BENCH_TIMES:-}" ]; then
    /usr/bin/time -f "$label %e %M %U %S" -a -o "$BENCH_TIMES" "$@"
  else
    "$@"
  fi
}

# 1. parse + validate + light normalization -> url ts tag hits domain
T ref-parse mawk -F'\t' -v OFS='\t' '
  NF != 6 && NF != 7 { next }
  length($3) != 14 || $3 !~ /^[0-9]+$/ || $6 !~ /^[0-9]+$/ { next }
  {
    url = $5
    p = index(url, "://"); if (p == 0) next
    scheme = tolower(substr(url, 1, p - 1))
    if (scheme != "http" && scheme != "https") next
    rest = substr(url, p + 3)
    h = match(rest, /[\/?#]/)
    if (h) { host = substr(rest, 1, h - 1); path = substr(rest, h) } else { host = rest; path = "/" }
    host = tolower(host)
    sub(/:(80|443)$/, "", host)
    if (host == "") next
    f = index(path, "#"); if (f) path = substr(path, 1, f - 1)
    if (substr(path, 1, 1) != "/") path = "/" path
    n = split(host, lab, ".")
    dom = n >= 2 ? lab[n - 1] "." lab[n] : host
    print scheme "://" host path, $3, $7, $6 + 0, dom
  }' "$reflog" |
  # 2. sort by url (stable), 3. group-sum
  T ref-sort sort -t "$(printf '\t')" -k1,1 -s -S 256M -T "$tmp" |
  T ref-group mawk -F'\t' -v OFS='\t' '
    $1 != k { if (k != "") print k, ts, tag, hits, dom; k = $1; ts = $2; tag = $3; hits = $4; dom = $5; next }
    { if ($2 > ts) ts = $2; if ($3 != "") tag = $3; hits += $4 }
    END { if (k != "") print k, ts, tag, hits, dom }' |
  # 4. full outer join with current_log: url i_ts i_tag i_hits i_dom c_ts c_tag c_hits c_dom
  T ref-join join -t "$(printf '\t')" -a1 -a2 -e- -o 0,1.2,1.3,1.4,1.5,2.2,2.3,2.4,2.5 - "$cur_in" |
  # 5. the hourly rule: filtered_log to stdout, next current_log to a file
  T ref-filter mawk -F'\t' -v OFS='\t' -v now="$now" -v resend=3600 -v keep=3600 -v next_cur="$cur_out.tmp" '
    function secs(t,  hr) {
      hr = substr(t, 1, 10)
      if (!(hr in base)) base[hr] = mktime(substr(t,1,4) " " substr(t,5,2) " " substr(t,7,2) " " substr(t,9,2) " 00 00")
      return base[hr] + substr(t, 11, 2) * 60 + substr(t, 13, 2)
    }
    BEGIN { nows = secs(now) }
    {
      if ($6 == "-") { print $1, $2, $3, $4, $5; print $1, $2, $3, $4, $5 > next_cur; next }
      ctag = $7 == "-" ? "" : $7
      if ($2 == "-") { if (nows - secs($6) < keep) print $1, $6, ctag, $8, $9 > next_cur; next }
      itag = $3 == "-" ? "" : $3
      hits = $4 + $8
      changed = itag != "" && itag != ctag
      due = secs($2) - secs($6) >= resend
      if (due || changed) {
        print $1, $2, itag, $4, $5
        print $1, ($2 > $6 ? $2 : $6), (itag != "" ? itag : ctag), hits, $5 > next_cur
      } else print $1, $6, ctag, hits, $5 > next_cur
    }' |
  tee "$filtered" |
  # 6. route by domain and write one queue file per Yacobot
  T ref-route mawk -F'\t' -v OFS='\t' -v map="$map" -v qdir="$qdir" -v name="$name" '
    BEGIN {
      while ((getline l < map) > 0) { split(l, m, "\t"); owner[m[1]] = m[2]; load[m[2]]++ }
      close(map)
      ny = 0; for (y in load) ys[++ny] = y
      if (ny == 0) { ny = 3; for (i = 1; i <= 3; i++) { ys[i] = i; load[i] = 0 } }
    }
    {
      d = $5
      if (!(d in owner)) {
        best = ys[1]; for (i = 2; i <= ny; i++) if (load[ys[i]] < load[best]) best = ys[i]
        owner[d] = best; load[best]++; print d, best >> map
      }
      y = owner[d]
      if (!(y in open)) { system("mkdir -p " sq(qdir "/" y)); open[y] = qdir "/" y "/" name ".tsv.tmp" }
      print $1, $2, $3, $4, $5 > open[y]
    }
    END { for (y in open) { close(open[y]); system("mv " sq(open[y]) " " sq(qdir "/" y "/" name ".tsv")) } }
    # A path quoted for the shell that system() runs (\047 is a single quote).
    function sq(s) { gsub(/\047/, "\047\\\047\047", s); return "\047" s "\047" }'
mv "$cur_out.tmp" "$cur_out"
