# Seed 003's test 1 shape: 100% reads of 4 KiB blocks, sequential, uncontrolled rate.
name     = seqread-max
rdpct    = 100
seekpct  = 0
xfersize = 4k
threads  = 1
iorate   = max
elapsed  = 1
warmup   = 0.2
size     = 64m
