#!/usr/bin/env python3
# Per-run ratios of limiter decision cost against the x/time/rate map, from
# the output of: go test ./limiter -run "^$" -bench BenchmarkDecide -benchmem -count=5
# Usage: python3 scripts/limiter-bench-ratios.py bench.txt
import re,sys,collections,statistics
rows=collections.defaultdict(list)
for line in open(sys.argv[1]):
    m=re.match(r'BenchmarkDecide/keys=(\d+)/(\w+)/(serial|parallel)-\d+\s+\d+\s+([\d.]+) ns/op\s+(\d+) B/op\s+(\d+) allocs/op',line)
    if m: rows[(m[1],m[2],m[3])].append((float(m[4]),int(m[6])))
impls=['harness','token_bucket','gcra','fixed_window','sliding_counter','sliding_log','x_time_rate_map','throttled_gcra']
for keys in ['1','10000','1000000']:
  for mode in ['serial','parallel']:
    print(f"\n### keys={keys} {mode}")
    print("| subject | ns/op (median of %d) | allocs/op | × vs x/time/rate map (raw, per-run median) | × net of harness |"%len(rows[(keys,'gcra',mode)]))
    print("|---|---:|---:|---:|---:|")
    base=rows[(keys,'x_time_rate_map',mode)]; h=rows[(keys,'harness',mode)]
    for im in impls:
      r=rows[(keys,im,mode)]
      if not r: continue
      med=statistics.median([x[0] for x in r])
      ratios=[b[0]/x[0] for b,x in zip(base,r)]
      net=[(b[0]-hh[0])/(x[0]-hh[0]) if x[0]>hh[0] else float('nan') for b,x,hh in zip(base,r,h)]
      rs = "" if im in('harness','x_time_rate_map') else "%.2f (%.2f–%.2f)"%(statistics.median(ratios),min(ratios),max(ratios))
      ns = "" if im in('harness','x_time_rate_map') else "%.2f"%statistics.median(net)
      print(f"| {im} | {med:.1f} | {r[0][1]} | {rs} | {ns} |")
