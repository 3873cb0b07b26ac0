# Seed 003's test 3 workload: 40% reads, all random, a mix of transfer sizes, two threads,
# at fixed rates (operations per second, both threads together).
name         = mixed-fixed
rdpct        = 40
seekpct      = 100
xfersize     = 4k:70, 8k:20, 64k:10
threads      = 2
iorate       = 1000, 10000, 50000
elapsed      = 1
warmup       = 0.2
distribution = fixed
size         = 64m
