# Seed 003's test 3 on NVM: 4 KiB random writes, no cache hits to speak of, a curve of
# fixed rates as percents of the uncontrolled maximum measured first (vdbench iorate=curve).
# Run: daisy bench io --workload examples/workloads/randwrite-curve.wl
name         = randwrite-curve
rdpct        = 0
seekpct      = 100
xfersize     = 4k
threads      = 1
iorate       = curve
curve        = 10, 50, 70, 90, 100
elapsed      = 1
warmup       = 0.2
distribution = exponential
size         = 64m
