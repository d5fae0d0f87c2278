# tests/prof/sampler_nofp_records.sh - shared by the no-frame-pointer
# preload tests (source it; not a test itself).
# nofp_records TRACES OUT: turns `go tool pprof -traces` output into one
# line per sample record: its value in ms, a tab, then its frames, leaf
# first, each followed by ';'.
nofp_records() {
  awk '
    function flush() { if (have) print v "\t" fr ";"; have = 0; fr = "" }
    /^-+\+-+/ { flush(); inrec = 1; next }
    inrec && /^ *thread_name:/ { next }
    inrec && !have && $1 ~ /^[0-9.]+(ms|s|us)$/ {
      v = $1; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
      v = (u == "s") ? v * 1000 : (u == "us") ? v / 1000 : v; have = 1
      $1 = ""; sub(/^ +/, ""); fr = $0; next }
    have { sub(/^ +/, ""); fr = fr ";" $0 }
    END { flush() }' "$1" >"$2"
}
